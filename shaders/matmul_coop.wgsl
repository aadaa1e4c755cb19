// f16 matrix products on cooperative matrices (NVIDIA tensor cores through
// VK_KHR_cooperative_matrix): out[b] = A[b] @ B[b] (+ bias), f16 operands, accumulated in
// f32; the result rounded to packed f16, or written as f32 with flag 8 (autocast's products,
// which would otherwise take a second pass to widen the f16 result and a third to add the
// bias).
//
// A workgroup is four subgroups of 32 invocations (the host uses this kernel only where
// every subgroup has 32) and computes a 128x128 output tile; each subgroup owns a 64x64
// block of it, 4x4 accumulators of 16x16. K is walked in stages of 32: the workgroup copies
// the stage's 128x32 slice of A and 32x128 slice of B into workgroup memory, 16 bytes per
// invocation per copy, and the subgroups load their 16x16 operand blocks from there. Two
// stages alternate: while the subgroups multiply one, the next is already on its way from
// memory into registers, and goes into the other buffer afterwards.
//
// The operands are bound as arrays of vec4<f16> ("quads", 8 bytes): WGSL has no wider f16
// loads, and an element-by-element copy cost more instructions than the multiply-adds it
// fed (BENCHMARKS.md). The staged tiles are quads too, so a copy is a load and a store with
// no conversion, and the cooperative loads read them with strides counted in quads.
//
// On an H200 this runs at about 103 TFLOP/s at 4096 (75 loading blocks straight from the
// operands). The ablations in BENCHMARKS.md ("GPU round 4") show the 16x16 block loads from
// workgroup memory set the pace: unpadded lines, 64x32 blocks per subgroup (more loads per
// multiply-add) or 4-byte staged elements are each a fifth to a third slower, while holding
// the next stage in registers or not changes nothing. 96x64 blocks ran at half the rate.
//
// Bounds: each 8-element piece of a stage that lies outside A or B is filled with zeros
// (they add nothing to the sums), and the output is written only inside [M, N]. Pieces are
// whole or absent, so the host sends only products with M, N and K multiples of 8 and each
// operand row-major or column-major (one unit stride), with the other stride, its offset and
// its batch strides multiples of 8 elements (16 bytes: quads two by two).
//
// Parameters: those of matmul.wgsl (0 M, 1 N, 2 K, 3 batch count, 4 batch rank, 5-6 offsets
// of A and B, 7-8 row and column strides of A, 9-10 of B, 11 workgroups per grid row, 12-23
// batch dims and strides, 24 K splits, 25 K per split (a multiple of 8), 26 flags: 4 a bias
// (27-28 its offset and stride, in f32 elements), 8 an f32 output). With several splits each
// (batch, split) job writes its f32 partial product to its own [M, N] block of the output,
// which `sum_splits` (matmul.wgsl) adds up with the bias: weight gradients, [D, B T] @
// [B T, F], have few output tiles and a long K.

enable f16;
enable wgpu_cooperative_matrix;

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read> b: array<vec4<f16>>;
@group(0) @binding(3) var<storage, read_write> out: array<u32>;
// The output and the bias again (the same buffers), as f32 for cooperative stores and loads.
@group(0) @binding(7) var<storage, read_write> out_f32: array<f32>;
@group(0) @binding(8) var<storage, read> bias_f32: array<f32>;

const TILE: u32 = 128u;
// K per stage.
const DEPTH: u32 = 32u;
// A staged slice is laid out as in its operand: "K-inner" (row-major A, column-major B:
// 128 lines of 32 elements along K) or "K-outer" (32 lines of 128 elements along M or N).
// Lines are padded by 8 elements so that the eight 16-byte rows a cooperative load reads at
// once fall in distinct memory banks. Widths in quads:
const INNER_LINE: u32 = 10u;
const OUTER_LINE: u32 = 34u;
// Quads per staged slice (the larger of 128 x 10 and 32 x 34).
const SLICE: u32 = 1280u;

// Two stages of each operand.
var<workgroup> staged_a: array<vec4<f16>, 2560>;
var<workgroup> staged_b: array<vec4<f16>, 2560>;
// One 16x16 accumulator per subgroup on its way out.
var<workgroup> scratch: array<f32, 1024>;

alias Acc = coop_mat16x16<f32, C>;

// Whether A (B) is row-major (unit column stride) or column-major: pipeline constants, so
// each specialisation copies and loads without a run-time branch.
override A_ROW_MAJOR: bool = true;
override B_ROW_MAJOR: bool = true;

// This invocation's four 8-element pieces of each stage of one operand (pieces 0..512 of a
// stage go to invocations 0..128 in turn): where each starts in the operand in the first
// stage, in quads, and `step`, how far it moves per stage; its place in the staged slice;
// its offset along K within a stage; and whether its line (a row of A, a column of B) lies
// inside the operand. Worked out once, so a stage's copy is a comparison and two loads per
// piece.
struct Pieces {
    source: array<u32, 4>,
    slot: array<u32, 4>,
    along_k: array<u32, 4>,
    inside: array<bool, 4>,
    step: u32,
}

// The pieces of an operand whose tile starts at line `first` of `extent` (M or N), lines
// `stride` elements apart, with K along the unit stride when `k_inner`.
fn pieces(lid: u32, k_inner: bool, base: u32, first: u32, extent: u32, stride: u32) -> Pieces {
    var ps: Pieces;
    for (var i = 0u; i < 4u; i++) {
        let c = lid + 128u * i;
        if (k_inner) {
            let line = c / 4u;
            let along = (c % 4u) * 8u;
            ps.source[i] = (base + (first + line) * stride + along) / 4u;
            ps.slot[i] = line * INNER_LINE + along / 4u;
            ps.along_k[i] = along;
            ps.inside[i] = first + line < extent;
        } else {
            let line = c / 16u;
            let along = (c % 16u) * 8u;
            ps.source[i] = (base + line * stride + first + along) / 4u;
            ps.slot[i] = line * OUTER_LINE + along / 4u;
            ps.along_k[i] = line;
            ps.inside[i] = first + along < extent;
        }
    }
    ps.step = select(DEPTH * stride, DEPTH, k_inner) / 4u;
    return ps;
}

fn a_pieces(lid: u32, base: u32, row: u32) -> Pieces {
    if (A_ROW_MAJOR) {
        return pieces(lid, true, base, row, p[0], p[7]);
    }
    return pieces(lid, false, base, row, p[0], p[8]);
}

fn b_pieces(lid: u32, base: u32, col: u32) -> Pieces {
    if (B_ROW_MAJOR) {
        return pieces(lid, false, base, col, p[1], p[9]);
    }
    return pieces(lid, true, base, col, p[1], p[10]);
}

// One stage's pieces of both operands, two quads each, in registers.
struct Fetched {
    of_a: array<vec4<f16>, 8>,
    of_b: array<vec4<f16>, 8>,
}

// Where piece `i` of stage `s` starts in its operand, in quads, or `NOWHERE` when it lies
// outside the operand or past `k_len`, the length of the job's K range.
const NOWHERE: u32 = 0xffffffffu;
fn piece_source(ps: Pieces, i: u32, s: u32, k_len: u32) -> u32 {
    if (ps.inside[i] && s * DEPTH + ps.along_k[i] < k_len) {
        return ps.source[i] + s * ps.step;
    }
    return NOWHERE;
}

// Reads stage `s` of both operands (pieces outside them stay zero: a function variable
// starts zeroed). `whole`: every piece of every stage lies inside both operands (a tile
// inside the output, K a multiple of the stage), so none is checked. The checks cost more
// than they seem: on an H200 each instruction spent per piece slows the product, whose
// copies, not its multiply-adds, set its pace (BENCHMARKS.md).
fn fetch(pa: Pieces, pb: Pieces, s: u32, k_len: u32, whole: bool) -> Fetched {
    var f: Fetched;
    if (whole) {
        let to_a = s * pa.step;
        let to_b = s * pb.step;
        for (var i = 0u; i < 4u; i++) {
            let from_a = pa.source[i] + to_a;
            f.of_a[2u * i] = a[from_a];
            f.of_a[2u * i + 1u] = a[from_a + 1u];
            let from_b = pb.source[i] + to_b;
            f.of_b[2u * i] = b[from_b];
            f.of_b[2u * i + 1u] = b[from_b + 1u];
        }
        return f;
    }
    for (var i = 0u; i < 4u; i++) {
        let from_a = piece_source(pa, i, s, k_len);
        if (from_a != NOWHERE) {
            f.of_a[2u * i] = a[from_a];
            f.of_a[2u * i + 1u] = a[from_a + 1u];
        }
        let from_b = piece_source(pb, i, s, k_len);
        if (from_b != NOWHERE) {
            f.of_b[2u * i] = b[from_b];
            f.of_b[2u * i + 1u] = b[from_b + 1u];
        }
    }
    return f;
}

// Writes fetched pieces into stage buffer `slot` (0 or 1).
fn stage(pa: Pieces, pb: Pieces, f: Fetched, slot: u32) {
    for (var i = 0u; i < 4u; i++) {
        let ta = slot * SLICE + pa.slot[i];
        staged_a[ta] = f.of_a[2u * i];
        staged_a[ta + 1u] = f.of_a[2u * i + 1u];
        let tb = slot * SLICE + pb.slot[i];
        staged_b[tb] = f.of_b[2u * i];
        staged_b[tb + 1u] = f.of_b[2u * i + 1u];
    }
}

// The 16x16 block of the staged A at tile row r, stage column kk (slice at quad `at0`).
// naga 30 panics on an index written inline in coopLoad: each is bound to a let first.
fn block_a(at0: u32, r: u32, kk: u32) -> coop_mat16x16<f16, A> {
    if (A_ROW_MAJOR) {
        let at = at0 + r * INNER_LINE + kk / 4u;
        return coopLoadT<coop_mat16x16<f16, A>>(&staged_a[at], INNER_LINE);
    }
    let at = at0 + kk * OUTER_LINE + r / 4u;
    return coopLoad<coop_mat16x16<f16, A>>(&staged_a[at], OUTER_LINE);
}

fn block_b(at0: u32, kk: u32, c: u32) -> coop_mat16x16<f16, B> {
    if (B_ROW_MAJOR) {
        let at = at0 + kk * OUTER_LINE + c / 4u;
        return coopLoadT<coop_mat16x16<f16, B>>(&staged_b[at], OUTER_LINE);
    }
    let at = at0 + c * INNER_LINE + kk / 4u;
    return coopLoad<coop_mat16x16<f16, B>>(&staged_b[at], INNER_LINE);
}

// Writes accumulator `acc` plus the bias as the output block at rows gm0.., columns gn0..:
// f32, or f16 (N and gn0 are even, so each lane writes whole words: two neighbouring
// columns).
fn write_block(acc: Acc, sg: u32, lane: u32, gm0: u32, gn0: u32, out_base: u32) {
    let n = p[1];
    let at = sg * 256u;
    coopStoreT(acc, &scratch[at], 16u);
    workgroupBarrier();
    if ((p[26] & 8u) != 0u) {
        // Two rows of 16 f32 per round: each half of the subgroup writes 64 bytes in a row.
        let gn = gn0 + lane % 16u;
        let column_bias = bias_of(gn, n);
        for (var round = 0u; round < 8u; round++) {
            let row = 2u * round + lane / 16u;
            let gm = gm0 + row;
            if (gm < p[0] && gn < n) {
                let value = scratch[at + row * 16u + lane % 16u] + column_bias;
                out[out_base + gm * n + gn] = bitcast<u32>(value);
            }
        }
        workgroupBarrier();
        return;
    }
    let gm = gm0 + lane / 2u;
    if (gm < p[0]) {
        for (var pair = lane % 2u; pair < 8u; pair += 2u) {
            let gn = gn0 + 2u * pair;
            if (gn < n) {
                let e = (lane / 2u) * 16u + 2u * pair;
                let low = half_bits(scratch[at + e] + bias_of(gn, n));
                let high = half_bits(scratch[at + e + 1u] + bias_of(gn + 1u, n));
                out[(out_base + gm * n + gn) / 2u] = low | (high << 16u);
            }
        }
    }
    workgroupBarrier();
}

// The bias of columns gn0..gn0 + 16 in each of 16 rows (a load with a row stride of 0): the
// accumulators' start when they go straight to the output.
fn bias_block(gn0: u32) -> Acc {
    let at = p[27] + gn0;
    return coopLoadT<Acc>(&bias_f32[at], 0u);
}

// Writes accumulator `acc` as the f32 output block at rows gm0.., columns gn0.., inside the
// output, straight from the cooperative matrix.
fn store_block(acc: Acc, gm0: u32, gn0: u32, out_base: u32) {
    let n = p[1];
    let at = out_base + gm0 * n + gn0;
    coopStoreT(acc, &out_f32[at], n);
}

@compute @workgroup_size(128)
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
    // naga wants the multiply-adds in workgroup-uniform control flow, so every workgroup
    // runs the loop: one past the last tile of a rounded-up grid stages zeros and writes
    // nothing.
    let tile = output_tile(wid, TILE);
    // This subgroup's 64x64 block within the tile.
    let sr = (sg / 2u) * 64u;
    let sc = (sg % 2u) * 64u;
    let splits = p[24];
    for (var job = wid.z; job < p[3] * splits; job += groups.z) {
        // The job's K range starts `k_begin` elements along K in both operands (A's column
        // stride, B's row stride).
        let k_begin = (job % splits) * p[25];
        let k_len = min(k, k_begin + p[25]) - k_begin;
        let stages = (k_len + DEPTH - 1u) / DEPTH;
        let bases = batch_bases(job / splits) + k_begin * vec2<u32>(p[8], p[9]);
        let pa = a_pieces(lid, bases.x, tile.x);
        let pb = b_pieces(lid, bases.y, tile.y);
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
        let inside = tile.x + TILE <= m && tile.y + TILE <= n;
        let whole = inside && k_len % DEPTH == 0u;
        // An f32 result (or a split's partial product, which has no bias) of a tile inside
        // the output, with no bias or a contiguous one starting at a multiple of 4 elements
        // (a cooperative load's 16-byte alignment): the accumulators start from the bias and
        // are stored straight to the output, without `write_block`'s trips through `scratch`
        // (two barriers per block). (Output blocks start at multiples of 8 elements: N is.)
        let has_bias = (p[26] & 4u) != 0u;
        let aligned_bias = p[28] == 1u && p[27] % 4u == 0u;
        let direct = (p[26] & 8u) != 0u && inside && (!has_bias || aligned_bias);
        if (direct && has_bias) {
            let bias0 = bias_block(tile.y + sc);
            let bias1 = bias_block(tile.y + sc + 16u);
            let bias2 = bias_block(tile.y + sc + 32u);
            let bias3 = bias_block(tile.y + sc + 48u);
            c00 = bias0;
            c10 = bias0;
            c20 = bias0;
            c30 = bias0;
            c01 = bias1;
            c11 = bias1;
            c21 = bias1;
            c31 = bias1;
            c02 = bias2;
            c12 = bias2;
            c22 = bias2;
            c32 = bias2;
            c03 = bias3;
            c13 = bias3;
            c23 = bias3;
            c33 = bias3;
        }
        stage(pa, pb, fetch(pa, pb, 0u, k_len, whole), 0u);
        workgroupBarrier();
        for (var s = 0u; s < stages; s++) {
            let slot = s % 2u;
            let more = s + 1u < stages;
            var next: Fetched;
            if (more) {
                next = fetch(pa, pb, s + 1u, k_len, whole);
            }
            let at0 = slot * SLICE;
            for (var kk = 0u; kk < DEPTH; kk += 16u) {
                let a0 = block_a(at0, sr, kk);
                let a1 = block_a(at0, sr + 16u, kk);
                let a2 = block_a(at0, sr + 32u, kk);
                let a3 = block_a(at0, sr + 48u, kk);
                let b0 = block_b(at0, kk, sc);
                let b1 = block_b(at0, kk, sc + 16u);
                let b2 = block_b(at0, kk, sc + 32u);
                let b3 = block_b(at0, kk, sc + 48u);
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
            // The other buffer was last read in the previous stage, which every subgroup
            // finished before the barrier that ended it.
            if (more) {
                stage(pa, pb, next, 1u - slot);
            }
            workgroupBarrier();
        }
        let base = job * m * n;
        let r0 = tile.x + sr;
        let c0 = tile.y + sc;
        if (direct) {
            store_block(c00, r0, c0, base);
            store_block(c01, r0, c0 + 16u, base);
            store_block(c02, r0, c0 + 32u, base);
            store_block(c03, r0, c0 + 48u, base);
            store_block(c10, r0 + 16u, c0, base);
            store_block(c11, r0 + 16u, c0 + 16u, base);
            store_block(c12, r0 + 16u, c0 + 32u, base);
            store_block(c13, r0 + 16u, c0 + 48u, base);
            store_block(c20, r0 + 32u, c0, base);
            store_block(c21, r0 + 32u, c0 + 16u, base);
            store_block(c22, r0 + 32u, c0 + 32u, base);
            store_block(c23, r0 + 32u, c0 + 48u, base);
            store_block(c30, r0 + 48u, c0, base);
            store_block(c31, r0 + 48u, c0 + 16u, base);
            store_block(c32, r0 + 48u, c0 + 32u, base);
            store_block(c33, r0 + 48u, c0 + 48u, base);
            continue;
        }
        // Every subgroup writes (barriers need the whole workgroup); blocks outside the
        // output write nothing.
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
