// What the fused attention kernels share (appended to attention.wgsl and
// attention_coop.wgsl): bindings, the rows a workgroup owns, and the masks.
//
// Parameters: 0 problems, 1 T, 2 S, 3 D (query and key width), 4 Dv (value width), 5 problems
// per mask row, 6 flags (1 causal, 2 key padding mask), 7 scale (f32 bits), 8
// workgroups per grid row, 9 q offset, 10 k offset, 11 v offset, 12 mask offset, 13 grad
// offset, 14-15 dropout's seed, 16 its probability, 17 the kept probabilities' factor
// (f32 bits). attention_coop.wgsl reads its rows through strides (attention.wgsl's operands
// are contiguous): 18 heads H, then per matrix the strides, in elements, of problem
// n = b H + h's batch entry b, head h and row: q, k, v, the output's gradient (19-30), and
// the results grad_qk, grad_v, out (31-39).

@group(0) @binding(0) var<storage, read> p: array<u32>;
// Bindings 1-3 (queries, keys, values) and 7 (the output's gradient) are declared by each
// module: f32 elements, or quads of them in attention_coop.wgsl.
// 1.0 where a key is padding, per mask row: [rows, S].
@group(0) @binding(4) var<storage, read> padding: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
@group(0) @binding(6) var<storage, read_write> lse: array<f32>;
// Per query row, dO . O: the softmax's correction term.
@group(0) @binding(8) var<storage, read> correction: array<f32>;
@group(0) @binding(9) var<storage, read_write> grad_qk: array<f32>;
@group(0) @binding(10) var<storage, read_write> grad_v: array<f32>;

const OPERAND_STRIDES: u32 = 19u;
const RESULT_STRIDES: u32 = 31u;

// The element where row `row` of problem `n` starts in the matrix whose strides are at
// p[strides..strides + 3], from element `offset`. (Heads of [B, H, T, d] views over
// [B, T, H, d] projections are read where they lie, without a copy.)
fn row_start(strides: u32, offset: u32, n: u32, row: u32) -> u32 {
    let heads = max(p[18], 1u);
    return offset + (n / heads) * p[strides] + (n % heads) * p[strides + 1u] + row * p[strides + 2u];
}

// Rows a workgroup owns.
const WG: u32 = 64u;
const CAUSAL: u32 = 1u;
const HAS_MASK: u32 = 2u;
// Whether the kernels draw dropout (a pipeline constant: without it no hashing code is
// compiled into the probability loops at all).
override WITH_DROPOUT: bool = false;

struct Rows {
    // The problem (batch entry and head).
    n: u32,
    // The first of the workgroup's 64 rows.
    first: u32,
    // This invocation's row.
    row: u32,
    // Whether the workgroup has a problem at all (uniform).
    has_problem: bool,
}

// `last_first`: a problem's last rows go to its first workgroups. Under the causal mask the
// last query rows see the most keys: launched first, the longest workgroups no longer trail
// at the end of the grid.
fn rows_of(wid: vec3<u32>, lid: u32, length: u32, last_first: bool) -> Rows {
    let blocks = max((length + WG - 1u) / WG, 1u);
    let w = wid.y * p[8] + wid.x;
    let n = w / blocks;
    let block = select(w % blocks, blocks - 1u - w % blocks, last_first);
    let first = block * WG;
    return Rows(n, first, first + lid, n < p[0]);
}

fn neg_inf() -> f32 {
    return bitcast<f32>(0xff800000u);
}

fn scale() -> f32 {
    return bitcast<f32>(p[7]);
}

fn causal() -> bool {
    return (p[6] & CAUSAL) != 0u;
}

// Whether key `j` of problem `n` is padding.
fn hidden(n: u32, j: u32) -> bool {
    if ((p[6] & HAS_MASK) == 0u) {
        return false;
    }
    let row = n / max(p[5], 1u);
    return padding[p[12] + row * p[2] + j] != 0.0;
}

// Whether every query of rows i0..i0 + 64 may see every key of j0..j0 + 64: the keys lie
// inside S, there is no padding mask and, under the causal mask, the last key comes no later
// than the first query. Such a tile needs no mask per element (uniform per workgroup).
fn open_tile(i0: u32, j0: u32) -> bool {
    return j0 + WG <= p[2] && (p[6] & HAS_MASK) == 0u && (!causal() || j0 + WG - 1u <= i0);
}

// One past the last key any query row of the workgroup may see.
fn key_end_of(r: Rows) -> u32 {
    if (causal()) {
        return min(p[2], min(p[1], r.first + WG));
    }
    return p[2];
}


// Dropout of probability (n, i, j) (problem, query, key): the kept ones' factor or 0, drawn
// for its index in the problems' [T, S] probabilities (dropout_draws.wgsl), as a dropout of
// those probabilities would draw it; 1 without dropout.
fn dropout_factor(n: u32, i: u32, j: u32) -> f32 {
    if (!WITH_DROPOUT) {
        return 1.0;
    }
    return kept_times((n * p[1] + i) * p[2] + j, p[14], p[15], bitcast<f32>(p[16]), bitcast<f32>(p[17]));
}
