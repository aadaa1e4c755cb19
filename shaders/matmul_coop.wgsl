// f16 matrix products on cooperative matrices (NVIDIA tensor cores through
// VK_KHR_cooperative_matrix): out[b] = A[b] @ B[b] with A and B packed f16 (two per word,
// any strides) and an f32 output, accumulated in f32.
//
// A workgroup of 256 invocations, eight subgroups of 32 (the host uses this kernel only
// where every subgroup has 32 invocations), computes a 128x128 output tile. Each step stages
// a 128x32 slice of A and a 32x128 slice of B in workgroup memory as f16, with bounds
// checks (ragged edges read zeros); subgroup s then multiplies its 64x32 part of the tile,
// 4x2 blocks of 16x16, with 16x16x16 multiply-adds. Results leave through a per-subgroup
// 16x16 scratch block, so edge tiles write only what lies inside the output.
//
// Parameters: those of matmul.wgsl (0 M, 1 N, 2 K, 3 batch count, 4 batch rank, 5-6 offsets
// of A and B, 7-8 row and column strides of A, 9-10 of B, 11 workgroups per grid row, 12-23
// batch dims and strides); K is never split here.

enable f16;
enable wgpu_cooperative_matrix;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

const TILE: u32 = 128u;
const DEPTH: u32 = 32u;

var<workgroup> tile_a: array<f16, 4096>; // [TILE][DEPTH], row-major
var<workgroup> tile_b: array<f16, 4096>; // [DEPTH][TILE], row-major
var<workgroup> scratch: array<f32, 2048>; // one 16x16 block per subgroup

// Element `i` of a packed f16 operand.
fn half_a(i: u32) -> f16 {
    let pair = bitcast<vec2<f16>>(a[i >> 1u]);
    return pair[i & 1u];
}

fn half_b(i: u32) -> f16 {
    let pair = bitcast<vec2<f16>>(b[i >> 1u]);
    return pair[i & 1u];
}

// Writes the 16x16 block `acc` at output rows gm0.., columns gn0.. (inside M x N only).
fn write_block(
    acc: coop_mat16x16<f32, C>,
    sg: u32,
    lane: u32,
    gm0: u32,
    gn0: u32,
    out_base: u32,
) {
    let m = p[0];
    let n = p[1];
    let at = sg * 256u;
    coopStoreT(acc, &scratch[at], 16u);
    workgroupBarrier();
    for (var e = lane; e < 256u; e += 32u) {
        let gm = gm0 + e / 16u;
        let gn = gn0 + e % 16u;
        if (gm < m && gn < n) {
            out[out_base + gm * n + gn] = scratch[at + e];
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(256)
fn matmul_coop(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let m = p[0];
    let n = p[1];
    let k = p[2];
    let tiles_n = (n + TILE - 1u) / TILE;
    let tiles = tiles_n * ((m + TILE - 1u) / TILE);
    let tile = wid.y * p[11] + wid.x;
    if (tile >= tiles) {
        return;
    }
    let row0 = (tile / tiles_n) * TILE;
    let col0 = (tile % tiles_n) * TILE;
    // Subgroup sg owns rows 64 (sg / 4).. and columns 32 (sg % 4).. of the tile.
    let sub_row = (sg / 4u) * 64u;
    let sub_col = (sg % 4u) * 32u;
    // Neighbouring invocations load neighbouring elements (see matmul.wgsl).
    let a_by_rows = p[8] != 1u && p[7] == 1u;
    let b_by_depth = p[10] != 1u && p[9] == 1u;
    for (var batch = wid.z; batch < p[3]; batch += groups.z) {
        let bases = batch_bases(batch);
        var c00 = coop_mat16x16<f32, C>();
        var c01 = coop_mat16x16<f32, C>();
        var c10 = coop_mat16x16<f32, C>();
        var c11 = coop_mat16x16<f32, C>();
        var c20 = coop_mat16x16<f32, C>();
        var c21 = coop_mat16x16<f32, C>();
        var c30 = coop_mat16x16<f32, C>();
        var c31 = coop_mat16x16<f32, C>();
        for (var k0 = 0u; k0 < k; k0 += DEPTH) {
            for (var l = 0u; l < 16u; l++) {
                let e = lid + l * 256u;
                let am = select(e / DEPTH, e % TILE, a_by_rows);
                let ak = select(e % DEPTH, e / TILE, a_by_rows);
                let gm = row0 + am;
                let gk = k0 + ak;
                var va = f16(0.0);
                if (gm < m && gk < k) {
                    va = half_a(bases.x + gm * p[7] + gk * p[8]);
                }
                tile_a[am * DEPTH + ak] = va;
                let bk = select(e / TILE, e % DEPTH, b_by_depth);
                let bn = select(e % TILE, e / DEPTH, b_by_depth);
                let gkb = k0 + bk;
                let gn = col0 + bn;
                var vb = f16(0.0);
                if (gkb < k && gn < n) {
                    vb = half_b(bases.y + gkb * p[9] + gn * p[10]);
                }
                tile_b[bk * TILE + bn] = vb;
            }
            workgroupBarrier();
            for (var kk = 0u; kk < DEPTH; kk += 16u) {
                // naga 30 panics on an index written inline in coopLoad: bind each to a let.
                let ia0 = (sub_row + 0u) * DEPTH + kk;
                let ia1 = (sub_row + 16u) * DEPTH + kk;
                let ia2 = (sub_row + 32u) * DEPTH + kk;
                let ia3 = (sub_row + 48u) * DEPTH + kk;
                let ib0 = kk * TILE + sub_col;
                let ib1 = kk * TILE + sub_col + 16u;
                let a0 = coopLoadT<coop_mat16x16<f16, A>>(&tile_a[ia0], DEPTH);
                let a1 = coopLoadT<coop_mat16x16<f16, A>>(&tile_a[ia1], DEPTH);
                let a2 = coopLoadT<coop_mat16x16<f16, A>>(&tile_a[ia2], DEPTH);
                let a3 = coopLoadT<coop_mat16x16<f16, A>>(&tile_a[ia3], DEPTH);
                let b0 = coopLoadT<coop_mat16x16<f16, B>>(&tile_b[ib0], TILE);
                let b1 = coopLoadT<coop_mat16x16<f16, B>>(&tile_b[ib1], TILE);
                c00 = coopMultiplyAdd(a0, b0, c00);
                c01 = coopMultiplyAdd(a0, b1, c01);
                c10 = coopMultiplyAdd(a1, b0, c10);
                c11 = coopMultiplyAdd(a1, b1, c11);
                c20 = coopMultiplyAdd(a2, b0, c20);
                c21 = coopMultiplyAdd(a2, b1, c21);
                c30 = coopMultiplyAdd(a3, b0, c30);
                c31 = coopMultiplyAdd(a3, b1, c31);
            }
            workgroupBarrier();
        }
        let out_base = batch * m * n;
        let gm = row0 + sub_row;
        let gn = col0 + sub_col;
        write_block(c00, sg, lane, gm, gn, out_base);
        write_block(c01, sg, lane, gm, gn + 16u, out_base);
        write_block(c10, sg, lane, gm + 16u, gn, out_base);
        write_block(c11, sg, lane, gm + 16u, gn + 16u, out_base);
        write_block(c20, sg, lane, gm + 32u, gn, out_base);
        write_block(c21, sg, lane, gm + 32u, gn + 16u, out_base);
        write_block(c30, sg, lane, gm + 48u, gn, out_base);
        write_block(c31, sg, lane, gm + 48u, gn + 16u, out_base);
    }
}
