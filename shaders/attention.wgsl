// Fused scaled dot-product attention, softmax(scale q k^T + masks) v, without the [T, S]
// scores: flash attention's online softmax, forward and backward.
//
// A workgroup of 64 invocations owns 64 rows of one problem (one batch entry and head): query
// rows in `attention_forward` and `attention_backward_dq`, key rows in
// `attention_backward_dkv`. Each invocation keeps its own rows in registers and walks the
// other side in tiles staged through workgroup memory, `TILE / WIDTH` rows at a time. Rows
// are padded with zeros to `WIDTH`, a pipeline constant (16, 32, 64 or 128): loops over it
// have constant bounds, so the compiler unrolls them and the per-row arrays stay in
// registers (indexed by a run-time width they went to local memory). The forward pass
// writes each query row's log-sum-exp; the backward passes recompute every probability from
// it, so nothing quadratic in the sequence is ever stored. With dropout, each probability's
// draw is hashed from its index (`dropout_factor`): the output sums the dropped-out
// probabilities, the backward passes draw them again.
//
// Passes: where a device ends long loops (lavapipe stops an invocation's loops after 65,535
// iterations in all), the host splits the side a kernel walks (keys for the forward pass and
// dQ, queries for dK/dV) into ranges, one dispatch each, and each pass after the first
// continues from what the one before wrote. dQ, dK and dV are sums over the walked rows, so a
// pass adds to them. The forward pass resumes its online softmax from the previous pass's
// normalised output and log-sum-exp: (running max, sum, accumulator) = (lse, 1, out) is the
// same state rebased, since out = acc / sum and lse = max + log(sum).
//
// Parameters and bindings: attention_common.wgsl, and 40-41 the walked range (first row, one
// past the last), 42 whether to continue (1) or start (0).

@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(7) var<storage, read> grad: array<f32>;

const WIDEST: u32 = 128u;
// Row width the kernels are specialised to: the operands' widths rounded up.
override WIDTH: u32 = 128u;
// Floats of each staged tile (7 KiB): two tiles fit the smallest workgroup memory allowed.
const TILE: u32 = 1792u;

var<workgroup> tile_a: array<f32, TILE>;
var<workgroup> tile_b: array<f32, TILE>;
// Per staged row: its log-sum-exp (backward over queries) or 1.0 if hidden (keys).
var<workgroup> row_lse: array<f32, 128>;
var<workgroup> row_correction: array<f32, 128>;

// Rows of keys (or queries) staged per tile.
fn tile_rows() -> u32 {
    return min(128u, TILE / WIDTH);
}

const WALK: u32 = 40u;

fn walk_begin() -> u32 {
    return p[WALK];
}

fn walk_end() -> u32 {
    return p[WALK + 1u];
}

// Whether the host splits the walk into passes at all. Only then do the kernels carry the
// code that resumes from an earlier pass: on an H200 its mere presence made causal attention
// at T = 4096 in f32 1.86x slower (25.7 -> 47.7 ms), though no pass ever resumed there.
override IN_PASSES: bool = false;

// Whether this pass continues from an earlier one's results (uniform).
fn resuming() -> bool {
    return IN_PASSES && p[WALK + 2u] != 0u;
}

// Stages `tile_rows()` keys from `j0` into `tile_a` and their values into `tile_b`, and marks
// in `row_lse` (1.0) those no query may see: past `key_end`, or padding. Called by the whole
// workgroup; the staged tiles are ready when it returns.
fn stage_keys(r: Rows, j0: u32, key_end: u32, lid: u32) {
    let s = p[2];
    let d = p[3];
    let dv = p[4];
    let rows = tile_rows();
    workgroupBarrier(); // the previous tile's readers are done
    for (var e = lid; e < rows * WIDTH; e += WG) {
        let j = j0 + e / WIDTH;
        let c = e % WIDTH;
        let key_row = r.n * s + min(j, s - 1u);
        tile_a[e] = select(0.0, k[p[10] + key_row * d + min(c, d - 1u)], j < s && c < d);
        tile_b[e] = select(0.0, v[p[11] + key_row * dv + min(c, dv - 1u)], j < s && c < dv);
    }
    for (var e = lid; e < rows; e += WG) {
        let j = j0 + e;
        row_lse[e] = select(0.0, 1.0, j >= key_end || hidden(r.n, min(j, s - 1u)));
    }
    workgroupBarrier();
}

@compute @workgroup_size(64)
fn attention_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = p[1];
    let s = p[2];
    let d = p[3];
    let dv = p[4];
    let r = rows_of(wid, lid, t, true);
    if (!r.has_problem) {
        return;
    }
    let valid = r.row < t;
    var query: array<f32, WIDEST>;
    var acc: array<f32, WIDEST>;
    for (var c = 0u; c < WIDTH; c++) {
        query[c] = select(0.0, q[p[9] + (r.n * t + min(r.row, t - 1u)) * d + min(c, d - 1u)], valid && c < d);
        acc[c] = 0.0;
    }
    var running_max = neg_inf();
    var sum = 0.0;
    if (resuming() && valid) {
        let row = r.n * t + r.row;
        running_max = lse[row];
        sum = select(0.0, 1.0, running_max != neg_inf());
        for (var c = 0u; c < WIDTH; c++) {
            acc[c] = select(0.0, out[row * dv + min(c, dv - 1u)], c < dv);
        }
    }
    let key_end = min(key_end_of(r), walk_end());
    let rows = tile_rows();
    for (var j0 = walk_begin(); j0 < key_end; j0 += rows) {
        stage_keys(r, j0, key_end, lid);
        // Invocations past the last row skip the work but not the barriers.
        for (var jj = 0u; valid && jj < rows; jj++) {
            let j = j0 + jj;
            if (row_lse[jj] != 0.0 || (causal() && j > r.row)) {
                continue;
            }
            var score = 0.0;
            for (var c = 0u; c < WIDTH; c++) {
                score += query[c] * tile_a[jj * WIDTH + c];
            }
            score *= scale();
            if (score > running_max) {
                let rescale = exp(running_max - score);
                sum *= rescale;
                for (var c = 0u; c < WIDTH; c++) {
                    acc[c] *= rescale;
                }
                running_max = score;
            }
            let weight = exp(score - running_max);
            sum += weight;
            // Dropout zeroes or scales the probability in the output, not in the sum.
            let dropped = weight * dropout_factor(r.n, r.row, j);
            for (var c = 0u; c < WIDTH; c++) {
                acc[c] += dropped * tile_b[jj * WIDTH + c];
            }
        }
    }
    if (!valid) {
        return;
    }
    let row = r.n * t + r.row;
    let inverse = select(0.0, 1.0 / sum, sum > 0.0);
    for (var c = 0u; c < WIDTH; c++) {
        if (c < dv) {
            out[row * dv + c] = acc[c] * inverse;
        }
    }
    lse[row] = select(neg_inf(), running_max + log(sum), sum > 0.0);
}

// dQ: a query row per invocation, walking the keys.
@compute @workgroup_size(64)
fn attention_backward_dq(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = p[1];
    let s = p[2];
    let d = p[3];
    let dv = p[4];
    let r = rows_of(wid, lid, t, true);
    if (!r.has_problem) {
        return;
    }
    let valid = r.row < t;
    let row = r.n * t + min(r.row, t - 1u);
    var query: array<f32, WIDEST>;
    var d_out: array<f32, WIDEST>;
    var dq: array<f32, WIDEST>;
    for (var c = 0u; c < WIDTH; c++) {
        query[c] = select(0.0, q[p[9] + row * d + min(c, d - 1u)], c < d);
        d_out[c] = select(0.0, grad[p[13] + row * dv + min(c, dv - 1u)], c < dv);
        dq[c] = select(0.0, grad_qk[row * d + min(c, d - 1u)], resuming() && c < d);
    }
    let row_lse_value = lse[row];
    let row_correction_value = correction[row];
    let seen = valid && row_lse_value != neg_inf();
    let key_end = min(key_end_of(r), walk_end());
    let rows = tile_rows();
    for (var j0 = walk_begin(); j0 < key_end; j0 += rows) {
        stage_keys(r, j0, key_end, lid);
        for (var jj = 0u; seen && jj < rows; jj++) {
            let j = j0 + jj;
            if (row_lse[jj] != 0.0 || (causal() && j > r.row)) {
                continue;
            }
            var score = 0.0;
            for (var c = 0u; c < WIDTH; c++) {
                score += query[c] * tile_a[jj * WIDTH + c];
            }
            let prob = exp(score * scale() - row_lse_value);
            var dp = 0.0;
            for (var c = 0u; c < WIDTH; c++) {
                dp += d_out[c] * tile_b[jj * WIDTH + c];
            }
            dp *= dropout_factor(r.n, r.row, j);
            let d_score = prob * (dp - row_correction_value) * scale();
            for (var c = 0u; c < WIDTH; c++) {
                dq[c] += d_score * tile_a[jj * WIDTH + c];
            }
        }
    }
    if (!valid) {
        return;
    }
    for (var c = 0u; c < WIDTH; c++) {
        if (c < d) {
            grad_qk[row * d + c] = dq[c];
        }
    }
}

// dK and dV: a key row per invocation, walking the queries.
@compute @workgroup_size(64)
fn attention_backward_dkv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = p[1];
    let s = p[2];
    let d = p[3];
    let dv = p[4];
    let r = rows_of(wid, lid, s, false);
    if (!r.has_problem) {
        return;
    }
    let valid = r.row < s && !hidden(r.n, min(r.row, s - 1u));
    let key_row = r.n * s + min(r.row, s - 1u);
    var key: array<f32, WIDEST>;
    var value: array<f32, WIDEST>;
    var dk: array<f32, WIDEST>;
    var dvalue: array<f32, WIDEST>;
    for (var c = 0u; c < WIDTH; c++) {
        key[c] = select(0.0, k[p[10] + key_row * d + min(c, d - 1u)], c < d);
        value[c] = select(0.0, v[p[11] + key_row * dv + min(c, dv - 1u)], c < dv);
        dk[c] = select(0.0, grad_qk[key_row * d + min(c, d - 1u)], resuming() && c < d);
        dvalue[c] = select(0.0, grad_v[key_row * dv + min(c, dv - 1u)], resuming() && c < dv);
    }
    // Under the causal mask queries before the workgroup's first key see none of its keys.
    var query_start = walk_begin();
    if (causal()) {
        query_start = max(query_start, min(r.first, t));
    }
    let query_end = min(t, walk_end());
    let rows = tile_rows();
    for (var i0 = query_start; i0 < query_end; i0 += rows) {
        workgroupBarrier();
        for (var e = lid; e < rows * WIDTH; e += WG) {
            let i = i0 + e / WIDTH;
            let c = e % WIDTH;
            let query_row = r.n * t + min(i, t - 1u);
            tile_a[e] = select(0.0, q[p[9] + query_row * d + min(c, d - 1u)], i < t && c < d);
            tile_b[e] = select(0.0, grad[p[13] + query_row * dv + min(c, dv - 1u)], i < t && c < dv);
        }
        for (var e = lid; e < rows; e += WG) {
            let i = min(i0 + e, t - 1u);
            row_lse[e] = select(neg_inf(), lse[r.n * t + i], i0 + e < query_end);
            row_correction[e] = correction[r.n * t + i];
        }
        workgroupBarrier();
        for (var ii = 0u; valid && ii < rows; ii++) {
            let i = i0 + ii;
            if (row_lse[ii] == neg_inf() || (causal() && r.row > i)) {
                continue;
            }
            var score = 0.0;
            for (var c = 0u; c < WIDTH; c++) {
                score += tile_a[ii * WIDTH + c] * key[c];
            }
            let prob = exp(score * scale() - row_lse[ii]);
            let factor = dropout_factor(r.n, i, r.row);
            let dropped = prob * factor;
            var dp = 0.0;
            for (var c = 0u; c < WIDTH; c++) {
                dp += tile_b[ii * WIDTH + c] * value[c];
                dvalue[c] += dropped * tile_b[ii * WIDTH + c];
            }
            let d_score = prob * (dp * factor - row_correction[ii]) * scale();
            for (var c = 0u; c < WIDTH; c++) {
                dk[c] += d_score * tile_a[ii * WIDTH + c];
            }
        }
    }
    if (r.row >= s) {
        return;
    }
    for (var c = 0u; c < WIDTH; c++) {
        if (c < d) {
            grad_qk[key_row * d + c] = dk[c];
        }
        if (c < dv) {
            grad_v[key_row * dv + c] = dvalue[c];
        }
    }
}
