// Batched matrix product out[b] = A[b] @ B[b] over strided operands (f32, or f16 read into
// f32 when HALF is set; transposed views are multiplied without a copy). Each workgroup of
// 256 threads computes a 64x64 tile of the output, 4x4 per thread, through 16-deep slices
// of A and B staged in workgroup memory.
//
// Parameters: 0 M, 1 N, 2 K, 3 batch count, 4 batch rank (up to 4), 5-6 offsets of A and B,
// 7-8 row and column strides of A, 9-10 of B, 11 workgroups per grid row, 12-15 batch dims,
// 16-19 batch strides of A, 20-23 of B, 24 K splits, 25 K per split. The output is
// contiguous [batch, M, N] ([batch, splits, M, N] partial products with several splits).

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

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

// The same product for large matrices. It repeats `matmul_tiled`'s structure because WGSL has
// no generics: the tile constants size the workgroup arrays and the per-thread registers.
// (A version staging both kernels' slices as vec4 rows measured slower on an H200; see
// BENCHMARKS.md.) A 128x128 tile per workgroup, 8x8 per thread,
// 8-deep slices (the same workgroup arrays, laid out [8][128]). More work per thread hides
// memory latency; the host picks it when both M and N are at least 128.
const WIDE: u32 = 128u;
const WIDE_DEPTH: u32 = 8u;

@compute @workgroup_size(256)
fn matmul_wide(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let m = p[0];
    let n = p[1];
    let k = p[2];
    let origin = output_tile(wid, WIDE);
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
        var acc: array<vec4<f32>, 16>;
        for (var i = 0u; i < 16u; i++) {
            acc[i] = vec4<f32>(0.0);
        }
        for (var k0 = k_begin; k0 < k_end; k0 += WIDE_DEPTH) {
            for (var l = 0u; l < 4u; l++) {
                let e = lid + l * 256u;
                let am = select(e / WIDE_DEPTH, e % WIDE, a_by_rows);
                let ak = select(e % WIDE_DEPTH, e / WIDE, a_by_rows);
                let gm = row0 + am;
                let gk = k0 + ak;
                var va = 0.0;
                if (live && gm < m && gk < k_end) {
                    va = load_a(base_a + gm * p[7] + gk * p[8]);
                }
                tile_a[ak * WIDE + am] = va;
                let bk = select(e / WIDE, e % WIDE_DEPTH, b_by_depth);
                let bn = select(e % WIDE, e / WIDE_DEPTH, b_by_depth);
                let gkb = k0 + bk;
                let gn = col0 + bn;
                var vb = 0.0;
                if (live && gkb < k_end && gn < n) {
                    vb = load_b(base_b + gkb * p[9] + gn * p[10]);
                }
                tile_b[bk * WIDE + bn] = vb;
            }
            workgroupBarrier();
            for (var kk = 0u; kk < WIDE_DEPTH; kk++) {
                let ra = kk * WIDE + ty * 8u;
                let rb = kk * WIDE + tx * 8u;
                let a0 = vec4<f32>(tile_a[ra], tile_a[ra + 1u], tile_a[ra + 2u], tile_a[ra + 3u]);
                let a1 = vec4<f32>(tile_a[ra + 4u], tile_a[ra + 5u], tile_a[ra + 6u], tile_a[ra + 7u]);
                let b0 = vec4<f32>(tile_b[rb], tile_b[rb + 1u], tile_b[rb + 2u], tile_b[rb + 3u]);
                let b1 = vec4<f32>(tile_b[rb + 4u], tile_b[rb + 5u], tile_b[rb + 6u], tile_b[rb + 7u]);
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
            for (var i = 0u; i < 8u; i++) {
                let gm = row0 + ty * 8u + i;
                if (gm < m) {
                    for (var j = 0u; j < 8u; j++) {
                        let gn = col0 + tx * 8u + j;
                        if (gn < n) {
                            out[out_base + gm * n + gn] = bitcast<u32>(acc[2u * i + j / 4u][j % 4u]);
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
