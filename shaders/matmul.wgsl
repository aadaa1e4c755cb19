// Batched matrix product out[b] = A[b] @ B[b] over strided operands (f32, or f16 read into
// f32 when HALF is set; transposed views are multiplied without a copy). Each workgroup of
// 256 threads computes a 64x64 tile of the output, 4x4 per thread, through 16-deep slices
// of A and B staged in workgroup memory.
//
// Parameters: 0 M, 1 N, 2 K, 3 batch count, 4 batch rank (up to 4), 5-6 offsets of A and B,
// 7-8 row and column strides of A, 9-10 of B, 11 workgroups per grid row, 12-15 batch dims,
// 16-19 batch strides of A, 20-23 of B, 24 K splits, 25 K per split, 26 `matmul_wide`'s
// vector loads (1: A, 2: B). The output is contiguous [batch, M, N] ([batch, splits, M, N]
// partial products with several splits).

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;
// A and B again (the same buffers), read four words at a time by `matmul_wide` when the host
// found the operand's contiguous axis, other stride, offsets and extents multiples of four.
@group(0) @binding(4) var<storage, read> a4: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read> b4: array<vec4<u32>>;

const TILE: u32 = 64u;

// Operands are packed f16 (two per word) when the pipeline sets HALF; the output stays f32.
// A pipeline constant, so each variant compiles without the other's branch.
override HALF: bool = false;

fn load_a(i: u32) -> f32 {
    if (HALF) {
        return unpack2x16float(a[i >> 1u])[i & 1u];
    }
    return bitcast<f32>(a[i]);
}

fn load_b(i: u32) -> f32 {
    if (HALF) {
        return unpack2x16float(b[i >> 1u])[i & 1u];
    }
    return bitcast<f32>(b[i]);
}

// `batch_bases` comes from matmul_batch.wgsl, appended to this file when it is compiled.
const DEPTH: u32 = 16u;

var<workgroup> tile_a: array<f32, 1024>; // [DEPTH][TILE], k-major
var<workgroup> tile_b: array<f32, 1024>; // [DEPTH][TILE]

@compute @workgroup_size(256)
fn matmul_tiled(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let m = p[0];
    let n = p[1];
    let k = p[2];
    let origin = output_tile(wid, TILE);
    let live = origin.z == 1u;
    let row0 = origin.x;
    let col0 = origin.y;
    let tx = lid % 16u;
    let ty = lid / 16u;
    // Jobs are (batch, split) pairs: with split-K (p[24] splits of p[25] along K) each job
    // writes its partial product to its own [M, N] block, which `sum_splits` adds up.
    for (var job = wid.z; job < p[3] * p[24]; job += groups.z) {
        let batch = job / p[24];
        let k_begin = (job % p[24]) * p[25];
        let k_end = min(k, k_begin + p[25]);
        let bases = batch_bases(batch);
        // Neighbouring invocations load neighbouring words: along K for a row-major A (and
        // a transposed B, as in `x @ W^T`), along M (N) for a transposed A (a row-major B).
        let a_by_rows = p[8] != 1u && p[7] == 1u;
        let b_by_depth = p[10] != 1u && p[9] == 1u;
        let base_a = bases.x;
        let base_b = bases.y;
        var acc: array<vec4<f32>, 4>;
        for (var i = 0u; i < 4u; i++) {
            acc[i] = vec4<f32>(0.0);
        }
        for (var k0 = k_begin; k0 < k_end; k0 += DEPTH) {
            for (var l = 0u; l < 4u; l++) {
                let e = lid + l * 256u;
                let am = select(e / DEPTH, e % TILE, a_by_rows);
                let ak = select(e % DEPTH, e / TILE, a_by_rows);
                let gm = row0 + am;
                let gk = k0 + ak;
                var va = 0.0;
                if (live && gm < m && gk < k_end) {
                    va = load_a(base_a + gm * p[7] + gk * p[8]);
                }
                tile_a[ak * TILE + am] = va;
                let bk = select(e / TILE, e % DEPTH, b_by_depth);
                let bn = select(e % TILE, e / DEPTH, b_by_depth);
                let gkb = k0 + bk;
                let gn = col0 + bn;
                var vb = 0.0;
                if (live && gkb < k_end && gn < n) {
                    vb = load_b(base_b + gkb * p[9] + gn * p[10]);
                }
                tile_b[bk * TILE + bn] = vb;
            }
            workgroupBarrier();
            for (var kk = 0u; kk < DEPTH; kk++) {
                let ra = kk * TILE + ty * 4u;
                let rb = kk * TILE + tx * 4u;
                let av = vec4<f32>(tile_a[ra], tile_a[ra + 1u], tile_a[ra + 2u], tile_a[ra + 3u]);
                let bv = vec4<f32>(tile_b[rb], tile_b[rb + 1u], tile_b[rb + 2u], tile_b[rb + 3u]);
                acc[0] += av.x * bv;
                acc[1] += av.y * bv;
                acc[2] += av.z * bv;
                acc[3] += av.w * bv;
            }
            workgroupBarrier();
        }
        if (live) {
            let out_base = job * m * n;
            for (var i = 0u; i < 4u; i++) {
                let gm = row0 + ty * 4u + i;
                if (gm < m) {
                    for (var j = 0u; j < 4u; j++) {
                        let gn = col0 + tx * 4u + j;
                        if (gn < n) {
                            out[out_base + gm * n + gn] = bitcast<u32>(acc[i][j]);
                        }
                    }
                }
            }
        }
    }
}

// The same product for large matrices, where a 128x128 tile per workgroup (8x8 outputs per
// invocation) hides memory latency behind more arithmetic; the host picks it when there are
// enough such tiles to fill the GPU. It repeats `matmul_tiled`'s structure because WGSL has
// no generics: the tile constants size the workgroup arrays and the per-thread registers.
// Slices are 16 deep, staged as vec4 rows padded to 33 vec4s (scalar stores of neighbouring
// invocations land in different banks, their vec4 reads are conflict-free); invocation
// (tx, ty) computes rows {4 ty .. 4 ty + 3, 64 + 4 ty ..} by columns {4 tx .., 64 + 4 tx ..},
// four vec4 reads of workgroup memory per 64 multiply-adds, and reads the next slice from
// global memory into registers while the current one is multiplied. On an H200 this made
// the transformer's products (`x @ W^T`, attention) 8-30% faster than 8-deep scalar slices
// without prefetch, and square products within 4% either way (BENCHMARKS.md).
const WIDE: u32 = 128u;
const PADDED: u32 = 33u;
const SLICE: u32 = 16u;

var<workgroup> slice_a: array<vec4<f32>, 528>; // [SLICE][PADDED]
var<workgroup> slice_b: array<vec4<f32>, 528>;

// Element `e` (0..2048) of a 128 x SLICE slice of A at depth k0: its row and depth within the
// slice; neighbouring `e` run along the operand's contiguous axis.
fn slice_a_coords(e: u32, a_by_rows: bool) -> vec2<u32> {
    return select(vec2<u32>(e / SLICE, e % SLICE), vec2<u32>(e % WIDE, e / WIDE), a_by_rows);
}

fn slice_b_coords(e: u32, b_by_depth: bool) -> vec2<u32> {
    // (depth, column)
    return select(vec2<u32>(e / WIDE, e % WIDE), vec2<u32>(e % SLICE, e / SLICE), b_by_depth);
}

// One job of `matmul_wide`: where its operands start, its output tile, the end of its K range,
// and along which axis neighbouring invocations read each operand.
struct WideJob {
    base_a: u32,
    base_b: u32,
    row0: u32,
    col0: u32,
    k_end: u32,
    live: bool,
    a_by_rows: bool,
    b_by_depth: bool,
    a_vec4: bool,
    b_vec4: bool,
}

// With vector loads, invocation `lid` reads vectors `v = lid` and `lid + 256` of each
// 128 x 16 slice. Along a contiguous K a vector holds four depths of one row (column of B):
// row v / 4, depths 4 (v % 4) ..; along a contiguous M (N) it holds four rows of one depth:
// depth v / 32, rows 4 (v % 32) .. Returns (row or column, depth) of its first element.
fn vector_coords(v: u32, along_depth: bool) -> vec2<u32> {
    return select(vec2<u32>(4u * (v % 32u), v / 32u), vec2<u32>(v / 4u, 4u * (v % 4u)), along_depth);
}

// This invocation's eight elements of each slice at depth `k0` (zero outside the matrices),
// each operand by vectors or one element at a time.
fn read_slice(j: WideJob, lid: u32, k0: u32, next_a: ptr<function, array<f32, 8>>, next_b: ptr<function, array<f32, 8>>) {
    for (var l = 0u; l < 2u; l++) {
        let v = lid + l * 256u;
        if (j.a_vec4) {
            let ca = vector_coords(v, !j.a_by_rows);
            let gm = j.row0 + ca.x;
            let gk = k0 + ca.y;
            var va = vec4<f32>(0.0);
            if (j.live && gm < p[0] && gk < j.k_end) {
                va = bitcast<vec4<f32>>(a4[(j.base_a + gm * p[7] + gk * p[8]) / 4u]);
            }
            for (var i = 0u; i < 4u; i++) {
                (*next_a)[4u * l + i] = va[i];
            }
        }
        if (j.b_vec4) {
            let cb = vector_coords(v, j.b_by_depth);
            let gn = j.col0 + cb.x;
            let gk = k0 + cb.y;
            var vb = vec4<f32>(0.0);
            if (j.live && gk < j.k_end && gn < p[1]) {
                vb = bitcast<vec4<f32>>(b4[(j.base_b + gk * p[9] + gn * p[10]) / 4u]);
            }
            for (var i = 0u; i < 4u; i++) {
                (*next_b)[4u * l + i] = vb[i];
            }
        }
    }
    // The operands without vector loads: element `lid + 256 l` of the slice, neighbouring
    // invocations along the operand's contiguous axis.
    for (var l = 0u; l < 8u; l++) {
        let e = lid + l * 256u;
        if (!j.a_vec4) {
            let ca = slice_a_coords(e, j.a_by_rows);
            let gm = j.row0 + ca.x;
            let gk = k0 + ca.y;
            (*next_a)[l] = 0.0;
            if (j.live && gm < p[0] && gk < j.k_end) {
                (*next_a)[l] = load_a(j.base_a + gm * p[7] + gk * p[8]);
            }
        }
        if (!j.b_vec4) {
            let cb = slice_b_coords(e, j.b_by_depth);
            let gkb = k0 + cb.x;
            let gn = j.col0 + cb.y;
            (*next_b)[l] = 0.0;
            if (j.live && gkb < j.k_end && gn < p[1]) {
                (*next_b)[l] = load_b(j.base_b + gkb * p[9] + gn * p[10]);
            }
        }
    }
}

// Stores this invocation's prefetched elements (`read_slice`'s mapping) into the slices.
fn store_slice(j: WideJob, lid: u32, next_a: ptr<function, array<f32, 8>>, next_b: ptr<function, array<f32, 8>>) {
    if (j.a_vec4) {
        for (var l = 0u; l < 2u; l++) {
            let ca = vector_coords(lid + l * 256u, !j.a_by_rows);
            if (j.a_by_rows) {
                slice_a[ca.y * PADDED + ca.x / 4u] = vec4<f32>((*next_a)[4u * l], (*next_a)[4u * l + 1u], (*next_a)[4u * l + 2u], (*next_a)[4u * l + 3u]);
            } else {
                for (var i = 0u; i < 4u; i++) {
                    slice_a[(ca.y + i) * PADDED + ca.x / 4u][ca.x % 4u] = (*next_a)[4u * l + i];
                }
            }
        }
    } else {
        for (var l = 0u; l < 8u; l++) {
            let ca = slice_a_coords(lid + l * 256u, j.a_by_rows);
            slice_a[ca.y * PADDED + ca.x / 4u][ca.x % 4u] = (*next_a)[l];
        }
    }
    if (j.b_vec4) {
        for (var l = 0u; l < 2u; l++) {
            let cb = vector_coords(lid + l * 256u, j.b_by_depth);
            if (!j.b_by_depth) {
                slice_b[cb.y * PADDED + cb.x / 4u] = vec4<f32>((*next_b)[4u * l], (*next_b)[4u * l + 1u], (*next_b)[4u * l + 2u], (*next_b)[4u * l + 3u]);
            } else {
                for (var i = 0u; i < 4u; i++) {
                    slice_b[(cb.y + i) * PADDED + cb.x / 4u][cb.x % 4u] = (*next_b)[4u * l + i];
                }
            }
        }
    } else {
        for (var l = 0u; l < 8u; l++) {
            let cb = slice_b_coords(lid + l * 256u, j.b_by_depth);
            slice_b[cb.x * PADDED + cb.y / 4u][cb.y % 4u] = (*next_b)[l];
        }
    }
}

@compute @workgroup_size(256)
fn matmul_wide(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let m = p[0];
    let n = p[1];
    let origin = output_tile(wid, WIDE);
    let tx = lid % 16u;
    let ty = lid / 16u;
    // Jobs are (batch, split) pairs: with split-K (p[24] splits of p[25] along K) each job
    // writes its partial product to its own [M, N] block, which `sum_splits` adds up.
    for (var job = wid.z; job < p[3] * p[24]; job += groups.z) {
        let k_begin = (job % p[24]) * p[25];
        let bases = batch_bases(job / p[24]);
        // Neighbouring invocations load neighbouring words: along K for a row-major A (and
        // a transposed B, as in `x @ W^T`), along M (N) for a transposed A (a row-major B).
        let j = WideJob(bases.x, bases.y, origin.x, origin.y, min(p[2], k_begin + p[25]),
            origin.z == 1u, p[8] != 1u && p[7] == 1u, p[10] != 1u && p[9] == 1u,
            (p[26] & 1u) != 0u, (p[26] & 2u) != 0u);
        var acc: array<vec4<f32>, 16>;
        for (var i = 0u; i < 16u; i++) {
            acc[i] = vec4<f32>(0.0);
        }
        var next_a: array<f32, 8>;
        var next_b: array<f32, 8>;
        read_slice(j, lid, k_begin, &next_a, &next_b);
        for (var k0 = k_begin; k0 < j.k_end; k0 += SLICE) {
            store_slice(j, lid, &next_a, &next_b);
            workgroupBarrier();
            if (k0 + SLICE < j.k_end) {
                read_slice(j, lid, k0 + SLICE, &next_a, &next_b);
            }
            for (var kk = 0u; kk < SLICE; kk++) {
                let a0 = slice_a[kk * PADDED + ty];
                let a1 = slice_a[kk * PADDED + 16u + ty];
                let b0 = slice_b[kk * PADDED + tx];
                let b1 = slice_b[kk * PADDED + 16u + tx];
                for (var i = 0u; i < 4u; i++) {
                    acc[2u * i] += a0[i] * b0;
                    acc[2u * i + 1u] += a0[i] * b1;
                    acc[2u * i + 8u] += a1[i] * b0;
                    acc[2u * i + 9u] += a1[i] * b1;
                }
            }
            workgroupBarrier();
        }
        if (j.live) {
            let out_base = job * m * n;
            for (var r = 0u; r < 8u; r++) {
                let gm = j.row0 + (r / 4u) * 64u + ty * 4u + r % 4u;
                if (gm < m) {
                    for (var c = 0u; c < 8u; c++) {
                        let gn = j.col0 + (c / 4u) * 64u + tx * 4u + c % 4u;
                        if (gn < n) {
                            out[out_base + gm * n + gn] = bitcast<u32>(acc[2u * r + c / 4u][c % 4u]);
                        }
                    }
                }
            }
        }
    }
}

// Adds the split-K partial products [batch, splits, M N] into [batch, M N].
// Parameters: 0 output elements, 1 M N, 2 splits, 3 threads per grid row.
@compute @workgroup_size(256)
fn sum_splits(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * p[3] + gid.x;
    if (i >= p[0]) {
        return;
    }
    let block = p[1];
    let splits = p[2];
    let first = (i / block) * splits * block + i % block;
    var total = 0.0;
    for (var s = 0u; s < splits; s++) {
        total += bitcast<f32>(a[first + s * block]);
    }
    out[i] = bitcast<u32>(total);
}
