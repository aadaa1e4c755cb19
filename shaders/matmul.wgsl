// Batched matrix product out[b] = A[b] @ B[b] over strided operands (f32, or f16 read into
// f32 when HALF is set; transposed views are multiplied without a copy). Each workgroup of
// 256 threads computes a 64x64 tile of the output, 4x4 per thread, through 16-deep slices
// of A and B staged in workgroup memory.
//
// Parameters: 0 M, 1 N, 2 K, 3 batch count, 4 batch rank (up to 4), 5-6 offsets of A and B,
// 7-8 row and column strides of A, 9-10 of B, 11 workgroups per grid row, 12-15 batch dims,
// 16-19 batch strides of A, 20-23 of B, 24 K splits, 25 K per split, 26 flags: `matmul_wide`'s
// vector loads (1: A, 2: B) and a bias (4), 27-28 the bias's offset and stride. The output is
// contiguous [batch, M, N] ([batch, splits, M, N] partial products with several splits).

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
            let col_bias = vec4<f32>(
                bias_of(col0 + tx * 4u, n),
                bias_of(col0 + tx * 4u + 1u, n),
                bias_of(col0 + tx * 4u + 2u, n),
                bias_of(col0 + tx * 4u + 3u, n),
            );
            for (var i = 0u; i < 4u; i++) {
                let gm = row0 + ty * 4u + i;
                if (gm < m) {
                    let row = acc[i] + col_bias;
                    for (var j = 0u; j < 4u; j++) {
                        let gn = col0 + tx * 4u + j;
                        if (gn < n) {
                            out[out_base + gm * n + gn] = bitcast<u32>(row[j]);
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

// One operand of a `matmul_wide` job as its slices see it: 128 lines (rows of A, columns of
// B) by SLICE depths. The two operands share the code that reads and stages them.
struct Operand {
    // 0: A (staged in `slice_a`), 1: B (`slice_b`)
    which: u32,
    base: u32,
    first_line: u32,
    // M for A, N for B
    lines: u32,
    line_stride: u32,
    depth_stride: u32,
    // neighbouring invocations read along K (else along the lines)
    along_depth: bool,
    // read four words at a time (the host checked alignment and extents)
    vectors: bool,
}

// Element `e` (0..2048) of a slice: its line and depth, neighbouring `e` along the operand's
// contiguous axis.
fn element_coords(e: u32, along_depth: bool) -> vec2<u32> {
    return select(vec2<u32>(e % WIDE, e / WIDE), vec2<u32>(e / SLICE, e % SLICE), along_depth);
}

// With vector loads, invocation `lid` reads vectors `v = lid` and `lid + 256` of a slice.
// Along a contiguous K a vector holds four depths of one line: line v / 4, depths 4 (v % 4)
// ..; along contiguous lines it holds four lines of one depth: depth v / 32, lines
// 4 (v % 32) .. Returns (line, depth) of its first element.
fn vector_coords(v: u32, along_depth: bool) -> vec2<u32> {
    return select(vec2<u32>(4u * (v % 32u), v / 32u), vec2<u32>(v / 4u, 4u * (v % 4u)), along_depth);
}

fn load_element(which: u32, i: u32) -> f32 {
    if (which == 0u) {
        return load_a(i);
    }
    return load_b(i);
}

fn load_vector(which: u32, word: u32) -> vec4<f32> {
    if (which == 0u) {
        return bitcast<vec4<f32>>(a4[word / 4u]);
    }
    return bitcast<vec4<f32>>(b4[word / 4u]);
}

// This invocation's eight elements of the operand's slice at depth `k0` (zero outside the
// matrix or the job's K range), by vectors or one element at a time.
fn read_operand(o: Operand, lid: u32, k0: u32, k_end: u32, live: bool, next: ptr<function, array<f32, 8>>) {
    if (o.vectors) {
        for (var l = 0u; l < 2u; l++) {
            let c = vector_coords(lid + l * 256u, o.along_depth);
            let line = o.first_line + c.x;
            let k = k0 + c.y;
            var w = vec4<f32>(0.0);
            if (live && line < o.lines && k < k_end) {
                w = load_vector(o.which, o.base + line * o.line_stride + k * o.depth_stride);
            }
            for (var i = 0u; i < 4u; i++) {
                (*next)[4u * l + i] = w[i];
            }
        }
        return;
    }
    for (var l = 0u; l < 8u; l++) {
        let c = element_coords(lid + l * 256u, o.along_depth);
        let line = o.first_line + c.x;
        let k = k0 + c.y;
        (*next)[l] = 0.0;
        if (live && line < o.lines && k < k_end) {
            (*next)[l] = load_element(o.which, o.base + line * o.line_stride + k * o.depth_stride);
        }
    }
}

// Word `lane` of vec4 `index` of the operand's slice.
fn put(which: u32, index: u32, lane: u32, value: f32) {
    if (which == 0u) {
        slice_a[index][lane] = value;
    } else {
        slice_b[index][lane] = value;
    }
}

// Stores this invocation's prefetched elements (`read_operand`'s mapping) into the slice,
// laid out [depth][line / 4] as vec4s of four lines.
fn store_operand(o: Operand, lid: u32, next: ptr<function, array<f32, 8>>) {
    if (o.vectors) {
        for (var l = 0u; l < 2u; l++) {
            let c = vector_coords(lid + l * 256u, o.along_depth);
            if (o.along_depth) {
                // four depths of one line
                for (var i = 0u; i < 4u; i++) {
                    put(o.which, (c.y + i) * PADDED + c.x / 4u, c.x % 4u, (*next)[4u * l + i]);
                }
            } else {
                // four lines of one depth: one whole vec4
                let v = vec4<f32>((*next)[4u * l], (*next)[4u * l + 1u], (*next)[4u * l + 2u], (*next)[4u * l + 3u]);
                if (o.which == 0u) {
                    slice_a[c.y * PADDED + c.x / 4u] = v;
                } else {
                    slice_b[c.y * PADDED + c.x / 4u] = v;
                }
            }
        }
        return;
    }
    for (var l = 0u; l < 8u; l++) {
        let c = element_coords(lid + l * 256u, o.along_depth);
        put(o.which, c.y * PADDED + c.x / 4u, c.x % 4u, (*next)[l]);
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
        let k_end = min(p[2], k_begin + p[25]);
        let live = origin.z == 1u;
        let a = Operand(0u, bases.x, origin.x, p[0], p[7], p[8], !(p[8] != 1u && p[7] == 1u), (p[26] & 1u) != 0u);
        let b = Operand(1u, bases.y, origin.y, p[1], p[10], p[9], p[10] != 1u && p[9] == 1u, (p[26] & 2u) != 0u);
        var acc: array<vec4<f32>, 16>;
        for (var i = 0u; i < 16u; i++) {
            acc[i] = vec4<f32>(0.0);
        }
        var next_a: array<f32, 8>;
        var next_b: array<f32, 8>;
        read_operand(a, lid, k_begin, k_end, live, &next_a);
        read_operand(b, lid, k_begin, k_end, live, &next_b);
        for (var k0 = k_begin; k0 < k_end; k0 += SLICE) {
            store_operand(a, lid, &next_a);
            store_operand(b, lid, &next_b);
            workgroupBarrier();
            if (k0 + SLICE < k_end) {
                read_operand(a, lid, k0 + SLICE, k_end, live, &next_a);
                read_operand(b, lid, k0 + SLICE, k_end, live, &next_b);
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
        if (live) {
            let out_base = job * m * n;
            var col_bias: array<vec4<f32>, 2>;
            for (var half = 0u; half < 2u; half++) {
                let gn = origin.y + half * 64u + tx * 4u;
                col_bias[half] = vec4<f32>(
                    bias_of(gn, n),
                    bias_of(gn + 1u, n),
                    bias_of(gn + 2u, n),
                    bias_of(gn + 3u, n),
                );
            }
            for (var r = 0u; r < 8u; r++) {
                let gm = origin.x + (r / 4u) * 64u + ty * 4u + r % 4u;
                if (gm < m) {
                    for (var c = 0u; c < 8u; c++) {
                        let gn = origin.y + (c / 4u) * 64u + tx * 4u + c % 4u;
                        if (gn < n) {
                            let value = acc[2u * r + c / 4u][c % 4u] + col_bias[c / 4u][c % 4u];
                            out[out_base + gm * n + gn] = bitcast<u32>(value);
                        }
                    }
                }
            }
        }
    }
}

// Adds the split-K partial products [batch, splits, M N] into [batch, M N], and the bias.
// Parameters: 0 output elements, 1 M N, 2 splits, 3 threads per grid row, 4 whether there is
// a bias, 5 N, 6-7 the bias's offset and stride.
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
    if (p[4] != 0u) {
        total += bitcast<f32>(bias[p[6] + (i % block) % p[5] * p[7]]);
    }
    out[i] = bitcast<u32>(total);
}
