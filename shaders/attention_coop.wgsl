// Fused scaled dot-product attention on cooperative matrices (tensor cores): the kernels of
// attention.wgsl for rows 64 wide, with the four products of a tile (q k^T, p v, and in the
// backward pass dO v^T, p^T dO, dS k, dS^T q) as f16 16x16 blocks accumulated in f32. This is
// autocast's attention: queries, keys, values and the output's gradient are rounded to f16
// as they are staged, and so are the probabilities and score gradients that feed the second
// product of each pair; scores, the softmax, the log-sum-exp and every sum stay f32.
//
// A workgroup is four subgroups of 32 invocations (the host uses these kernels only where
// every subgroup has 32) and owns 64 rows of one problem, 16 per subgroup: query rows in
// `attention_forward_coop` and `attention_backward_dq_coop`, key rows in
// `attention_backward_dkv_coop`. Its own rows stay in registers as operand blocks; the other
// side is walked in tiles of 64 rows staged in workgroup memory, each read into registers
// while the tile before it is multiplied (on an H200 that halved the kernels' time: the
// loads, not the matrix units, set their pace; BENCHMARKS.md). Element-wise work (masks,
// exponentials) needs single elements, which cooperative matrices do not expose: each block
// of scores goes through `scratch` (f32), and the f16 operand made from it through
// `operand`, 16 rows per subgroup, two invocations per row.
//
// The forward pass takes one sweep over the keys with an online softmax; a cooperative
// matrix cannot scale its rows in registers, so after each tile the accumulators take a
// trip through `scratch` to be rescaled to the rows' new maxima. The backward passes recompute
// the probabilities from the log-sum-exp, as attention.wgsl does, and dropout's draws with
// them (`dropout_factor`), applied before each probability is rounded for its product.
//
// Parameters and bindings: attention_common.wgsl, with D = Dv = 64.

enable f16;
enable wgpu_cooperative_matrix;

alias Block = coop_mat16x16<f16, A>;
alias Right = coop_mat16x16<f16, B>;
alias Sums = coop_mat16x16<f32, C>;

// A staged line: 64 halves as 16 quads, padded by 2 quads so that the rows a cooperative
// load reads at once fall in different memory banks.
const LINE: u32 = 18u;
// A subgroup's f32 scratch line, in quads: 64 scores padded by 4.
const SCRATCH_LINE: u32 = 17u;

// Two staged tiles of 64 rows (q/k and v/dO by kernel), at quads X and Y.
var<workgroup> tiles: array<vec4<f16>, 2304>;
const X: u32 = 0u;
const Y: u32 = 1152u;
// Per subgroup: a 16x64 block of scores (or their gradients), f32.
var<workgroup> scratch: array<vec4<f32>, 1088>;
// Per subgroup: the 16x64 f16 operand made from it.
var<workgroup> operand: array<vec4<f16>, 1152>;
// `attention_backward_dkv_coop`: per query of the staged tile, its log-sum-exp (quads 0..16)
// and correction term (16..32), so that each invocation reads its 32 columns' values as 16
// quads instead of 64 scalars from memory.
var<workgroup> per_query: array<vec4<f32>, 32>;
// `attention_forward_coop`: per subgroup, whether a row of its moved its maximum in this tile.
var<workgroup> rescale_votes: vec4<u32>;

// How far a tile's scores may pass a row's running maximum before the forward pass moves it:
// the probabilities are then at most e^4 times the kept ones' factor, which stays inside f16
// for any dropout up to 0.999 (a smaller margin beyond that, none past 1 - 1/32768).
fn max_slack() -> f32 {
    var factor = 1.0;
    if (WITH_DROPOUT) {
        factor = bitcast<f32>(p[17]);
    }
    return clamp(log(32768.0 / factor), 0.0, 4.0);
}

@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> grad: array<vec4<f32>>;

// Quad `at` of operand `which` (0 q, 1 k, 2 v, 3 the output's gradient).
fn quad_of(which: u32, at: u32) -> vec4<f32> {
    switch which {
        case 0u: {
            return q[at];
        }
        case 1u: {
            return k[at];
        }
        case 2u: {
            return v[at];
        }
        default: {
            return grad[at];
        }
    }
}

// An invocation's share of a tile on its way from an operand to workgroup memory: quads
// `lid + 128 m` of the tile's 64 x 16, still f32. Read a tile ahead, the loads are in
// flight while the current tile is multiplied.
struct Fetched {
    quads: array<vec4<f32>, 8>,
}

// Rows `first..first + 64` of problem `n`'s [length, 64] rows in operand `which` (from
// element `offset`; offset and strides multiples of 4), zeros past `length` (a function
// variable starts zeroed).
fn fetch(which: u32, offset: u32, n: u32, length: u32, first: u32, lid: u32) -> Fetched {
    var f: Fetched;
    let strides = OPERAND_STRIDES + 3u * which;
    // Invocation `lid` copies quad lid % 16 of rows first + lid / 16 + 8 m.
    let base = row_start(strides, offset, n, first + lid / 16u) / 4u + lid % 16u;
    let step = 8u * (p[strides + 2u] / 4u);
    // A tile of whole rows copies without a check per quad: on an H200 these copies, not
    // the products, set the kernels' pace, and every instruction in them counts (as in
    // matmul_coop.wgsl).
    if (first + WG <= length) {
        for (var m = 0u; m < 8u; m++) {
            f.quads[m] = quad_of(which, base + step * m);
        }
        return f;
    }
    for (var m = 0u; m < 8u; m++) {
        if (first + lid / 16u + 8u * m < length) {
            f.quads[m] = quad_of(which, base + step * m);
        }
    }
    return f;
}

// Writes fetched quads as f16 into the tile at `tile`. Called by the whole workgroup,
// between barriers.
fn stage(tile: u32, f: Fetched, lid: u32) {
    for (var m = 0u; m < 8u; m++) {
        let e = lid + 128u * m;
        tiles[tile + (e / 16u) * LINE + e % 16u] = vec4<f16>(f.quads[m]);
    }
}

// Operand blocks at row r, column c (multiples of 16) of the tile at `tile`: as a left
// operand, as a right one, and as the right operand transposed (element (i, j) is the
// tile's (c + j, r + i)). naga 30 panics on an index written inline in coopLoad: each is
// bound to a let first.
fn left(tile: u32, r: u32, c: u32) -> Block {
    let at = tile + r * LINE + c / 4u;
    return coopLoadT<Block>(&tiles[at], LINE);
}

fn right(tile: u32, r: u32, c: u32) -> Right {
    let at = tile + r * LINE + c / 4u;
    return coopLoadT<Right>(&tiles[at], LINE);
}

fn right_transposed(tile: u32, r: u32, c: u32) -> Right {
    let at = tile + c * LINE + r / 4u;
    return coopLoad<Right>(&tiles[at], LINE);
}

// Columns c.. of subgroup `sg`'s f16 operand.
fn left_operand(sg: u32, c: u32) -> Block {
    let at = sg * 16u * LINE + c / 4u;
    return coopLoadT<Block>(&operand[at], LINE);
}

// Writes block `j` (columns 16 j..) of subgroup `sg`'s scratch.
fn keep(sums: Sums, sg: u32, j: u32) {
    let at = sg * 16u * SCRATCH_LINE + j * 4u;
    coopStoreT(sums, &scratch[at], SCRATCH_LINE);
}

// The 64 columns of a subgroup's 16 rows into its scratch: the rows' operand blocks along
// the shared width (in registers) against the 64 rows staged in `tile`, read as the right
// operand transposed.
fn products(a0: Block, a1: Block, a2: Block, a3: Block, tile: u32, sg: u32) {
    for (var j = 0u; j < 4u; j++) {
        var sums = Sums();
        sums = coopMultiplyAdd(a0, right_transposed(tile, 0u, j * 16u), sums);
        sums = coopMultiplyAdd(a1, right_transposed(tile, 16u, j * 16u), sums);
        sums = coopMultiplyAdd(a2, right_transposed(tile, 32u, j * 16u), sums);
        sums = coopMultiplyAdd(a3, right_transposed(tile, 48u, j * 16u), sums);
        keep(sums, sg, j);
    }
}

// Adds the subgroup's f16 operand (16 x 64) times the 64 rows staged in `tile` to the
// accumulators of the result's four 16-column blocks.
fn accumulate(
    s0: ptr<function, Sums>,
    s1: ptr<function, Sums>,
    s2: ptr<function, Sums>,
    s3: ptr<function, Sums>,
    tile: u32,
    sg: u32,
) {
    let p0 = left_operand(sg, 0u);
    let p1 = left_operand(sg, 16u);
    let p2 = left_operand(sg, 32u);
    let p3 = left_operand(sg, 48u);
    *s0 = coopMultiplyAdd(p0, right(tile, 0u, 0u), *s0);
    *s0 = coopMultiplyAdd(p1, right(tile, 16u, 0u), *s0);
    *s0 = coopMultiplyAdd(p2, right(tile, 32u, 0u), *s0);
    *s0 = coopMultiplyAdd(p3, right(tile, 48u, 0u), *s0);
    *s1 = coopMultiplyAdd(p0, right(tile, 0u, 16u), *s1);
    *s1 = coopMultiplyAdd(p1, right(tile, 16u, 16u), *s1);
    *s1 = coopMultiplyAdd(p2, right(tile, 32u, 16u), *s1);
    *s1 = coopMultiplyAdd(p3, right(tile, 48u, 16u), *s1);
    *s2 = coopMultiplyAdd(p0, right(tile, 0u, 32u), *s2);
    *s2 = coopMultiplyAdd(p1, right(tile, 16u, 32u), *s2);
    *s2 = coopMultiplyAdd(p2, right(tile, 32u, 32u), *s2);
    *s2 = coopMultiplyAdd(p3, right(tile, 48u, 32u), *s2);
    *s3 = coopMultiplyAdd(p0, right(tile, 0u, 48u), *s3);
    *s3 = coopMultiplyAdd(p1, right(tile, 16u, 48u), *s3);
    *s3 = coopMultiplyAdd(p2, right(tile, 32u, 48u), *s3);
    *s3 = coopMultiplyAdd(p3, right(tile, 48u, 48u), *s3);
}

// Block `j` of subgroup `sg`'s scratch, as `keep` wrote it.
fn kept(sg: u32, j: u32) -> Sums {
    let at = sg * 16u * SCRATCH_LINE + j * 4u;
    return coopLoadT<Sums>(&scratch[at], SCRATCH_LINE);
}

// The invocation's share of its subgroup's 16 rows of 64 columns: row `lane / 2`, and of its
// 16 quads of columns those with the parity of `lane`, quad `2 c + lane % 2` for c in 0..8.
fn column_of(lane: u32, c: u32, e: u32) -> u32 {
    return (2u * c + lane % 2u) * 4u + e;
}

fn operand_at(sg: u32, lane: u32, c: u32) -> u32 {
    return (sg * 16u + lane / 2u) * LINE + 2u * c + lane % 2u;
}

// The invocation's 32 elements of its subgroup's scratch, scaled by `factor`.
fn read_share(sg: u32, lane: u32, factor: f32) -> array<f32, 32> {
    var values: array<f32, 32>;
    for (var c = 0u; c < 8u; c++) {
        let quad = scratch[(sg * 16u + lane / 2u) * SCRATCH_LINE + 2u * c + lane % 2u] * factor;
        for (var e = 0u; e < 4u; e++) {
            values[c * 4u + e] = quad[e];
        }
    }
    return values;
}

// Writes the invocation's 32 elements as its share of the subgroup's f16 operand.
fn write_operand(values: array<f32, 32>, sg: u32, lane: u32) {
    for (var c = 0u; c < 8u; c++) {
        let quad = vec4<f32>(values[c * 4u], values[c * 4u + 1u], values[c * 4u + 2u], values[c * 4u + 3u]);
        operand[operand_at(sg, lane, c)] = vec4<f16>(quad);
    }
}

// Whether query `i` may not see key `j` (key past the end, causal, padding).
fn masked(n: u32, i: u32, j: u32) -> bool {
    return j >= p[2] || (causal() && j > i) || hidden(n, min(j, p[2] - 1u));
}

// Writes a subgroup's [16, 64] result from its four column blocks, times the invocation's
// `row_factor`, to rows `row0..` of problem `n`'s [length, 64] rows in grad_qk (0), grad_v
// (1) or out (2), at the strides the host gave each.
fn write_rows(s0: Sums, s1: Sums, s2: Sums, s3: Sums, sg: u32, lane: u32, row0: u32, n: u32, length: u32, into: u32, row_factor: f32) {
    keep(s0, sg, 0u);
    keep(s1, sg, 1u);
    keep(s2, sg, 2u);
    keep(s3, sg, 3u);
    workgroupBarrier();
    let row = row0 + lane / 2u;
    let values = read_share(sg, lane, row_factor);
    if (row < length) {
        let start = row_start(RESULT_STRIDES + 3u * into, 0u, n, row);
        for (var c = 0u; c < 8u; c++) {
            for (var e = 0u; e < 4u; e++) {
                let at = start + column_of(lane, c, e);
                let value = values[c * 4u + e];
                if (into == 0u) {
                    grad_qk[at] = value;
                } else if (into == 1u) {
                    grad_v[at] = value;
                } else {
                    out[at] = value;
                }
            }
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(128)
fn attention_forward_coop(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let t = p[1];
    let s = p[2];
    let r = rows_of(wid, 0u, t, true);
    if (!r.has_problem) {
        return;
    }
    stage(X, fetch(0u, p[9], r.n, t, r.first, lid), lid);
    workgroupBarrier();
    let q0 = left(X, sg * 16u, 0u);
    let q1 = left(X, sg * 16u, 16u);
    let q2 = left(X, sg * 16u, 32u);
    let q3 = left(X, sg * 16u, 48u);
    // This invocation's query row.
    let i = r.first + sg * 16u + lane / 2u;
    let key_end = key_end_of(r);
    // One sweep over the keys with an online softmax: per tile, the rows' running maximum,
    // each probability as exp(score - maximum) and the accumulators rescaled to the new
    // maximum; the two invocations of a row keep their own sums and merge them at the end.
    var running_max = neg_inf();
    var sum = 0.0;
    var o0 = Sums();
    var o1 = Sums();
    var o2 = Sums();
    var o3 = Sums();
    let slack = max_slack();
    var keys = fetch(1u, p[10], r.n, s, 0u, lid);
    var values = fetch(2u, p[11], r.n, s, 0u, lid);
    for (var j0 = 0u; j0 < key_end; j0 += WG) {
        workgroupBarrier();
        stage(X, keys, lid);
        stage(Y, values, lid);
        workgroupBarrier();
        if (j0 + WG < key_end) {
            keys = fetch(1u, p[10], r.n, s, j0 + WG, lid);
            values = fetch(2u, p[11], r.n, s, j0 + WG, lid);
        }
        products(q0, q1, q2, q3, X, sg);
        workgroupBarrier();
        var probs = read_share(sg, lane, scale());
        let open = open_tile(r.first, j0);
        var block_max = neg_inf();
        for (var c = 0u; c < 32u; c++) {
            if (!open && masked(r.n, i, j0 + column_of(lane, c / 4u, c % 4u))) {
                probs[c] = neg_inf();
            }
            block_max = max(block_max, probs[c]);
        }
        block_max = max(block_max, subgroupShuffleXor(block_max, 1u));
        // The maximum moves only when the tile passes it by more than `slack`: the result is
        // the same (every sum is taken against the one maximum), and a tile that moves no
        // row's maximum, nearly every tile after the first few, skips the accumulators' trip
        // through `scratch`. Until a row has seen a key its maximum is -inf and its
        // accumulators are zeros: nothing to rescale.
        let raise = block_max > running_max + slack;
        let new_max = select(running_max, block_max, raise);
        let seen_any = new_max != neg_inf();
        let trip = raise && running_max != neg_inf();
        let rescale = select(1.0, exp(running_max - new_max), trip);
        var block_sum = 0.0;
        for (var c = 0u; c < 32u; c++) {
            let weight = select(0.0, exp(probs[c] - new_max), seen_any);
            block_sum += weight;
            probs[c] = weight * dropout_factor(r.n, i, j0 + column_of(lane, c / 4u, c % 4u));
        }
        sum = sum * rescale + block_sum;
        running_max = new_max;
        write_operand(probs, sg, lane);
        let moved = subgroupAny(trip);
        if (lane == 0u) {
            rescale_votes[sg] = select(0u, 1u, moved);
        }
        // (A barrier too: the scores are read, the operand written.)
        let votes = workgroupUniformLoad(&rescale_votes);
        if (any(votes != vec4<u32>(0u))) {
            // The scratch takes the accumulators, each row scaled by its factor (cooperative
            // matrices cannot scale rows in registers).
            keep(o0, sg, 0u);
            keep(o1, sg, 1u);
            keep(o2, sg, 2u);
            keep(o3, sg, 3u);
            workgroupBarrier();
            for (var c = 0u; c < 8u; c++) {
                let at = (sg * 16u + lane / 2u) * SCRATCH_LINE + 2u * c + lane % 2u;
                scratch[at] *= rescale;
            }
            workgroupBarrier();
            o0 = kept(sg, 0u);
            o1 = kept(sg, 1u);
            o2 = kept(sg, 2u);
            o3 = kept(sg, 3u);
        }
        accumulate(&o0, &o1, &o2, &o3, Y, sg);
    }
    sum += subgroupShuffleXor(sum, 1u);
    let lse_row = select(neg_inf(), running_max + log(sum), sum > 0.0);
    workgroupBarrier();
    write_rows(o0, o1, o2, o3, sg, lane, r.first + sg * 16u, r.n, t, 2u, select(0.0, 1.0 / sum, sum > 0.0));
    if (lane % 2u == 0u && i < t) {
        lse[r.n * t + i] = lse_row;
    }
}

// dQ: 64 query rows per workgroup, walking the keys. Per key tile, the probabilities P and
// dP = dO v^T make dS = P (dP - dO . O) scale, and dQ += dS k.
@compute @workgroup_size(128)
fn attention_backward_dq_coop(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let t = p[1];
    let s = p[2];
    let r = rows_of(wid, 0u, t, true);
    if (!r.has_problem) {
        return;
    }
    stage(X, fetch(0u, p[9], r.n, t, r.first, lid), lid);
    stage(Y, fetch(3u, p[13], r.n, t, r.first, lid), lid);
    workgroupBarrier();
    let q0 = left(X, sg * 16u, 0u);
    let q1 = left(X, sg * 16u, 16u);
    let q2 = left(X, sg * 16u, 32u);
    let q3 = left(X, sg * 16u, 48u);
    let g0 = left(Y, sg * 16u, 0u);
    let g1 = left(Y, sg * 16u, 16u);
    let g2 = left(Y, sg * 16u, 32u);
    let g3 = left(Y, sg * 16u, 48u);
    let i = r.first + sg * 16u + lane / 2u;
    let row = r.n * t + min(i, t - 1u);
    let lse_row = select(neg_inf(), lse[row], i < t);
    let correction_row = correction[row];
    var d0 = Sums();
    var d1 = Sums();
    var d2 = Sums();
    var d3 = Sums();
    let key_end = key_end_of(r);
    var keys = fetch(1u, p[10], r.n, s, 0u, lid);
    var values = fetch(2u, p[11], r.n, s, 0u, lid);
    for (var j0 = 0u; j0 < key_end; j0 += WG) {
        workgroupBarrier();
        stage(X, keys, lid);
        stage(Y, values, lid);
        workgroupBarrier();
        if (j0 + WG < key_end) {
            keys = fetch(1u, p[10], r.n, s, j0 + WG, lid);
            values = fetch(2u, p[11], r.n, s, j0 + WG, lid);
        }
        products(q0, q1, q2, q3, X, sg);
        workgroupBarrier();
        var probs = read_share(sg, lane, scale());
        let open = open_tile(r.first, j0);
        for (var c = 0u; c < 32u; c++) {
            let seen = lse_row != neg_inf() && (open || !masked(r.n, i, j0 + column_of(lane, c / 4u, c % 4u)));
            probs[c] = select(0.0, exp(probs[c] - lse_row), seen);
        }
        workgroupBarrier();
        products(g0, g1, g2, g3, Y, sg);
        workgroupBarrier();
        var ds = read_share(sg, lane, 1.0);
        for (var c = 0u; c < 32u; c++) {
            let factor = dropout_factor(r.n, i, j0 + column_of(lane, c / 4u, c % 4u));
            ds[c] = probs[c] * (ds[c] * factor - correction_row) * scale();
        }
        write_operand(ds, sg, lane);
        workgroupBarrier();
        accumulate(&d0, &d1, &d2, &d3, X, sg);
    }
    workgroupBarrier();
    write_rows(d0, d1, d2, d3, sg, lane, r.first + sg * 16u, r.n, t, 0u, 1.0);
}

// Invocation `lid`'s share of `per_query` for the tile of queries from `i0`: the
// log-sum-exp of query i0 + lid (-inf past the end) or, from lid 64 on, the correction term
// of query i0 + lid - 64.
fn query_term(n: u32, t: u32, i0: u32, lid: u32) -> f32 {
    let i = i0 + lid % WG;
    let row = n * t + min(i, t - 1u);
    if (lid < WG) {
        return select(neg_inf(), lse[row], i < t);
    }
    return correction[row];
}

// dK and dV: 64 key rows per workgroup, walking the queries. Per query tile, with P^T and
// dP^T = v dO^T from the key side: dV += P^T dO and dK += dS^T q.
@compute @workgroup_size(128)
fn attention_backward_dkv_coop(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let t = p[1];
    let s = p[2];
    let r = rows_of(wid, 0u, s, false);
    if (!r.has_problem) {
        return;
    }
    stage(X, fetch(1u, p[10], r.n, s, r.first, lid), lid);
    stage(Y, fetch(2u, p[11], r.n, s, r.first, lid), lid);
    workgroupBarrier();
    let k0 = left(X, sg * 16u, 0u);
    let k1 = left(X, sg * 16u, 16u);
    let k2 = left(X, sg * 16u, 32u);
    let k3 = left(X, sg * 16u, 48u);
    let v0 = left(Y, sg * 16u, 0u);
    let v1 = left(Y, sg * 16u, 16u);
    let v2 = left(Y, sg * 16u, 32u);
    let v3 = left(Y, sg * 16u, 48u);
    // This invocation's key row.
    let j = r.first + sg * 16u + lane / 2u;
    var dk0 = Sums();
    var dk1 = Sums();
    var dk2 = Sums();
    var dk3 = Sums();
    var dv0 = Sums();
    var dv1 = Sums();
    var dv2 = Sums();
    var dv3 = Sums();
    // Under the causal mask queries before the workgroup's first key see none of its keys.
    var query_start = 0u;
    if (causal()) {
        query_start = min(r.first, t);
    }
    var queries = fetch(0u, p[9], r.n, t, query_start, lid);
    var d_out = fetch(3u, p[13], r.n, t, query_start, lid);
    var term = query_term(r.n, t, query_start, lid);
    for (var i0 = query_start; i0 < t; i0 += WG) {
        workgroupBarrier();
        stage(X, queries, lid);
        stage(Y, d_out, lid);
        per_query[lid / 4u][lid % 4u] = term;
        workgroupBarrier();
        if (i0 + WG < t) {
            queries = fetch(0u, p[9], r.n, t, i0 + WG, lid);
            d_out = fetch(3u, p[13], r.n, t, i0 + WG, lid);
            term = query_term(r.n, t, i0 + WG, lid);
        }
        products(k0, k1, k2, k3, X, sg);
        workgroupBarrier();
        var probs = read_share(sg, lane, scale());
        // (Queries past T see nothing all the same: their log-sum-exp is -inf.)
        let open = open_tile(i0, r.first);
        var corrections: array<f32, 32>;
        for (var quad = 0u; quad < 8u; quad++) {
            let lse_columns = per_query[2u * quad + lane % 2u];
            let correction_columns = per_query[16u + 2u * quad + lane % 2u];
            for (var e = 0u; e < 4u; e++) {
                let c = quad * 4u + e;
                let i = i0 + column_of(lane, quad, e);
                corrections[c] = correction_columns[e];
                let seen = lse_columns[e] != neg_inf() && (open || !masked(r.n, i, j));
                probs[c] = select(0.0, exp(probs[c] - lse_columns[e]), seen);
            }
        }
        workgroupBarrier();
        products(v0, v1, v2, v3, Y, sg);
        workgroupBarrier();
        var ds = read_share(sg, lane, 1.0);
        for (var c = 0u; c < 32u; c++) {
            let factor = dropout_factor(r.n, i0 + column_of(lane, c / 4u, c % 4u), j);
            ds[c] = probs[c] * (ds[c] * factor - corrections[c]) * scale();
            probs[c] *= factor;
        }
        write_operand(probs, sg, lane);
        workgroupBarrier();
        accumulate(&dv0, &dv1, &dv2, &dv3, Y, sg);
        workgroupBarrier();
        write_operand(ds, sg, lane);
        workgroupBarrier();
        accumulate(&dk0, &dk1, &dk2, &dk3, X, sg);
    }
    workgroupBarrier();
    write_rows(dk0, dk1, dk2, dk3, sg, lane, r.first + sg * 16u, r.n, s, 0u, 1.0);
    write_rows(dv0, dv1, dv2, dv3, sg, lane, r.first + sg * 16u, r.n, s, 1u, 1.0);
}
