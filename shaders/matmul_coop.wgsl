// f16 matrix products on cooperative matrices (NVIDIA tensor cores through
// VK_KHR_cooperative_matrix): out[b] = A[b] @ B[b], f16 operands, accumulated in f32, the
// result rounded to packed f16.
//
// A workgroup is four subgroups of 32 invocations (the host uses this kernel only where
// every subgroup has 32) and computes a 128x128 output tile; each subgroup owns a 64x64
// block of it, 4x4 accumulators of 16x16, and multiplies it with 16x16x16 steps whose
// operand blocks it loads straight from the operands. Measured on an H200 (BENCHMARKS.md),
// this beat staging the operands in workgroup memory: WGSL has no wide loads of f16, so
// staging cost more instructions than the multiply-adds it fed.
//
// Loading straight from memory has no bounds checks, so the host sends only products this
// kernel covers exactly: M and N multiples of 64 (a subgroup's block lies wholly inside or
// outside the output), K a multiple of 16, each operand row-major or column-major (one unit
// stride) with the other stride, its offset and its batch strides multiples of 8 elements
// (16 bytes, as the loads want them aligned).
//
// Parameters: those of matmul.wgsl (0 M, 1 N, 2 K, 3 batch count, 4 batch rank, 5-6 offsets
// of A and B, 7-8 row and column strides of A, 9-10 of B, 11 workgroups per grid row, 12-23
// batch dims and strides); K is never split here.

enable f16;
enable wgpu_cooperative_matrix;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<f16>;
@group(0) @binding(2) var<storage, read> b: array<f16>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;

const TILE: u32 = 128u;

// One 16x16 accumulator per subgroup on its way out.
var<workgroup> scratch: array<f32, 1024>;

alias Acc = coop_mat16x16<f32, C>;

// Whether A (B) is row-major (unit column stride) or column-major: pipeline constants, so
// each specialisation loads its operands without a run-time branch.
override A_ROW_MAJOR: bool = true;
override B_ROW_MAJOR: bool = true;

// The 16x16 block of A at rows r.., columns c.. (matrix at `base`).
// naga 30 panics on an index written inline in coopLoad: each is bound to a let first.
fn block_a(base: u32, r: u32, c: u32) -> coop_mat16x16<f16, A> {
    if (A_ROW_MAJOR) {
        let at = base + r * p[7] + c;
        return coopLoadT<coop_mat16x16<f16, A>>(&a[at], p[7]);
    }
    let at = base + c * p[8] + r;
    return coopLoad<coop_mat16x16<f16, A>>(&a[at], p[8]);
}

fn block_b(base: u32, r: u32, c: u32) -> coop_mat16x16<f16, B> {
    if (B_ROW_MAJOR) {
        let at = base + r * p[9] + c;
        return coopLoadT<coop_mat16x16<f16, B>>(&b[at], p[9]);
    }
    let at = base + c * p[10] + r;
    return coopLoad<coop_mat16x16<f16, B>>(&b[at], p[10]);
}

// Writes accumulator `acc` as the f16 output block at rows gm0.., columns gn0.. (N and gn0
// are even, so each lane writes whole words: two neighbouring columns).
fn write_block(acc: Acc, sg: u32, lane: u32, gm0: u32, gn0: u32, out_base: u32) {
    let n = p[1];
    let at = sg * 256u;
    coopStoreT(acc, &scratch[at], 16u);
    workgroupBarrier();
    let gm = gm0 + lane / 2u;
    if (gm < p[0] && gn0 < n) {
        for (var pair = lane % 2u; pair < 8u; pair += 2u) {
            let e = (lane / 2u) * 16u + 2u * pair;
            let low = half_bits(scratch[at + e]);
            let high = half_bits(scratch[at + e + 1u]);
            out[(out_base + gm * n + gn0 + 2u * pair) / 2u] = low | (high << 16u);
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(128)
fn matmul_coop(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let m = p[0];
    let n = p[1];
    let k = p[2];
    // naga wants the multiply-adds in workgroup-uniform control flow (and does not see a
    // function's result as uniform), so no subgroup skips the loop: a block outside the
    // output (in an edge tile, or a whole workgroup past the last tile of a rounded-up grid)
    // reads the last block inside instead and writes nothing.
    let origin = output_tile(wid, TILE);
    let r0 = origin.x + (sg / 2u) * 64u;
    let c0 = origin.y + (sg % 2u) * 64u;
    let lr0 = min(r0, m - 64u);
    let lc0 = min(c0, n - 64u);
    for (var batch = wid.z; batch < p[3]; batch += groups.z) {
        let bases = batch_bases(batch);
        var c00 = Acc();
        var c01 = Acc();
        var c02 = Acc();
        var c03 = Acc();
        var c10 = Acc();
        var c11 = Acc();
        var c12 = Acc();
        var c13 = Acc();
        var c20 = Acc();
        var c21 = Acc();
        var c22 = Acc();
        var c23 = Acc();
        var c30 = Acc();
        var c31 = Acc();
        var c32 = Acc();
        var c33 = Acc();
        for (var k0 = 0u; k0 < k; k0 += 16u) {
            let a0 = block_a(bases.x, lr0, k0);
            let a1 = block_a(bases.x, lr0 + 16u, k0);
            let a2 = block_a(bases.x, lr0 + 32u, k0);
            let a3 = block_a(bases.x, lr0 + 48u, k0);
            let b0 = block_b(bases.y, k0, lc0);
            let b1 = block_b(bases.y, k0, lc0 + 16u);
            let b2 = block_b(bases.y, k0, lc0 + 32u);
            let b3 = block_b(bases.y, k0, lc0 + 48u);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c02 = coopMultiplyAdd(a0, b2, c02);
            c03 = coopMultiplyAdd(a0, b3, c03);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
            c12 = coopMultiplyAdd(a1, b2, c12);
            c13 = coopMultiplyAdd(a1, b3, c13);
            c20 = coopMultiplyAdd(a2, b0, c20);
            c21 = coopMultiplyAdd(a2, b1, c21);
            c22 = coopMultiplyAdd(a2, b2, c22);
            c23 = coopMultiplyAdd(a2, b3, c23);
            c30 = coopMultiplyAdd(a3, b0, c30);
            c31 = coopMultiplyAdd(a3, b1, c31);
            c32 = coopMultiplyAdd(a3, b2, c32);
            c33 = coopMultiplyAdd(a3, b3, c33);
        }
        // Every subgroup writes (barriers need the whole workgroup); blocks outside the
        // output write nothing.
        let base = batch * m * n;
        write_block(c00, sg, lane, r0, c0, base);
        write_block(c01, sg, lane, r0, c0 + 16u, base);
        write_block(c02, sg, lane, r0, c0 + 32u, base);
        write_block(c03, sg, lane, r0, c0 + 48u, base);
        write_block(c10, sg, lane, r0 + 16u, c0, base);
        write_block(c11, sg, lane, r0 + 16u, c0 + 16u, base);
        write_block(c12, sg, lane, r0 + 16u, c0 + 32u, base);
        write_block(c13, sg, lane, r0 + 16u, c0 + 48u, base);
        write_block(c20, sg, lane, r0 + 32u, c0, base);
        write_block(c21, sg, lane, r0 + 32u, c0 + 16u, base);
        write_block(c22, sg, lane, r0 + 32u, c0 + 32u, base);
        write_block(c23, sg, lane, r0 + 32u, c0 + 48u, base);
        write_block(c30, sg, lane, r0 + 48u, c0, base);
        write_block(c31, sg, lane, r0 + 48u, c0 + 16u, base);
        write_block(c32, sg, lane, r0 + 48u, c0 + 32u, base);
        write_block(c33, sg, lane, r0 + 48u, c0 + 48u, base);
    }
}
