// Row reductions: segments of a workgroup reduce contiguous rows of `len` elements (the host
// moves the reduced axes last and makes them contiguous first). Sum, max, min, argmax,
// argmin, and softmax / log-softmax of each row (and its gradient).
//
// Parameters: 0 rows, 1 row length, 2 op code, 3 workgroups per grid row, 4 input offset,
// 5 invocations per row (the segment).

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

const WG: u32 = 256u;
const SUM: u32 = 0u;
const MAX: u32 = 1u;
const MIN: u32 = 2u;
const ARGMAX: u32 = 3u;
const ARGMIN: u32 = 4u;

var<workgroup> values: array<f32, 256>;
var<workgroup> indices: array<u32, 256>;

fn combine(op: u32, x: f32, ix: u32, y: f32, iy: u32) -> vec2<u32> {
    // returns (value bits, index) of the winner; ties keep the smaller index
    var take_y: bool;
    switch op {
        case 0u: { return vec2<u32>(bitcast<u32>(x + y), 0u); }
        case 1u, 3u: { take_y = y > x || (y == x && iy < ix) || (y != y && x == x); }
        default: { take_y = y < x || (y == x && iy < ix) || (y != y && x == x); }
    }
    if (take_y) {
        return vec2<u32>(bitcast<u32>(y), iy);
    }
    return vec2<u32>(bitcast<u32>(x), ix);
}

fn identity(op: u32) -> f32 {
    switch op {
        case 0u: { return 0.0; }
        case 1u, 3u: { return bitcast<f32>(0xff800000u); }
        default: { return bitcast<f32>(0x7f800000u); }
    }
}

// Reduces `values`/`indices` of each segment of `segment` invocations (a power of two) into
// the segment's first slot.
fn tree(op: u32, lid: u32, segment: u32) {
    for (var width = segment / 2u; width > 0u; width = width / 2u) {
        workgroupBarrier();
        if (lid % segment < width) {
            let r = combine(op, values[lid], indices[lid], values[lid + width], indices[lid + width]);
            values[lid] = bitcast<f32>(r.x);
            indices[lid] = r.y;
        }
    }
    workgroupBarrier();
}

// Rows are reduced by segments of `p[5]` invocations (a power of two, 32 to 256), several
// short rows to a workgroup, as the softmax below: one workgroup and a 256-step tree for
// each of attention's rows of 64 took 0.23 ms for 98,304 of them on an H200.
@compute @workgroup_size(256)
fn reduce_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let segment = p[5];
    let row = (wid.y * p[3] + wid.x) * (WG / segment) + lid / segment;
    let lane = lid % segment;
    let rows = p[0];
    let len = p[1];
    let op = p[2];
    let valid = row < rows;
    let base = p[4] + row * len;
    var acc = identity(op);
    var at = 0xffffffffu;
    if (valid) {
        for (var j = lane; j < len; j += segment) {
            let r = combine(op, acc, at, bitcast<f32>(a[base + j]), j);
            acc = bitcast<f32>(r.x);
            at = r.y;
        }
    }
    values[lid] = acc;
    indices[lid] = at;
    tree(op, lid, segment);
    if (valid && lane == 0u) {
        if (op == ARGMAX || op == ARGMIN) {
            out[row] = indices[lid];
        } else {
            out[row] = bitcast<u32>(values[lid]);
        }
    }
}

// Softmax rows are handled by segments of `p[5]` invocations (a power of two, 32 to 256) of
// a workgroup, several short rows to a workgroup (one workgroup a row with a 256-step tree
// ran at a tenth of PyTorch's rate on 65,536 rows of 256). Invocation `lane` of a segment
// keeps elements `lane + c * segment` (c < CACHED) in registers between the passes; longer
// rows re-read the rest.
//
// Parameters: 0 rows, 1 row length, 2 op (0 softmax, 1 log-softmax), 3 workgroups per grid
// row, 4 input offset, 5 segment, 6 gradient offset (backward).
const CACHED: u32 = 8u;

@group(0) @binding(3) var<storage, read> g: array<u32>;

// `v` reduced (sum or max) over each segment of `segment` invocations, returned to all of them.
fn segment_reduce(v: f32, lid: u32, segment: u32, op: u32) -> f32 {
    workgroupBarrier(); // the previous reduction's readers are done with `values`
    values[lid] = v;
    for (var width = segment / 2u; width > 0u; width = width / 2u) {
        workgroupBarrier();
        if (lid % segment < width) {
            let other = values[lid + width];
            if (op == MAX) {
                values[lid] = max_keeping_nan(values[lid], other);
            } else {
                values[lid] += other;
            }
        }
    }
    workgroupBarrier();
    return values[lid - lid % segment];
}

// The larger of `m` and `v`, NaN if either is (WGSL's `max` may drop a NaN operand): a row
// holding a NaN has a NaN maximum, so its log-sum-exp is NaN and not the maximum of the rest.
fn max_keeping_nan(m: f32, v: f32) -> f32 {
    return select(max(m, v), m + v, m != m || v != v);
}

struct SoftmaxRow {
    row: u32,
    lane: u32,
    valid: bool,
    base: u32,
    // the row's maximum and the sum of exp(x - maximum)
    shift: f32,
    total: f32,
}

// Reads a row into `cache` (shifted by the row's maximum) and finds the maximum and the sum.
fn softmax_row(wid: vec3<u32>, lid: u32, cache: ptr<function, array<f32, CACHED>>) -> SoftmaxRow {
    let segment = p[5];
    let len = p[1];
    let row = (wid.y * p[3] + wid.x) * (WG / segment) + lid / segment;
    let lane = lid % segment;
    let valid = row < p[0];
    let base = p[4] + row * len;
    var m = identity(MAX);
    for (var c = 0u; c < CACHED; c++) {
        let j = lane + c * segment;
        (*cache)[c] = 0.0;
        if (valid && j < len) {
            (*cache)[c] = bitcast<f32>(a[base + j]);
            m = max_keeping_nan(m, (*cache)[c]);
        }
    }
    for (var j = lane + CACHED * segment; valid && j < len; j += segment) {
        m = max_keeping_nan(m, bitcast<f32>(a[base + j]));
    }
    let row_max = segment_reduce(m, lid, segment, MAX);
    var s = 0.0;
    for (var c = 0u; c < CACHED; c++) {
        if (valid && lane + c * segment < len) {
            (*cache)[c] -= row_max;
            s += exp((*cache)[c]);
        }
    }
    for (var j = lane + CACHED * segment; valid && j < len; j += segment) {
        s += exp(bitcast<f32>(a[base + j]) - row_max);
    }
    let total = segment_reduce(s, lid, segment, SUM);
    return SoftmaxRow(row, lane, valid, base, row_max, total);
}

@compute @workgroup_size(256)
fn softmax_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var cache: array<f32, CACHED>;
    let r = softmax_row(wid, lid, &cache);
    if (!r.valid) {
        return;
    }
    let len = p[1];
    let segment = p[5];
    let log_total = log(r.total);
    let log_softmax = p[2] == 1u;
    for (var c = 0u; c < CACHED; c++) {
        let j = r.lane + c * segment;
        if (j < len) {
            out[r.row * len + j] = bitcast<u32>(softmax_value(cache[c], r.total, log_total, log_softmax));
        }
    }
    for (var j = r.lane + CACHED * segment; j < len; j += segment) {
        let shifted = bitcast<f32>(a[r.base + j]) - r.shift;
        out[r.row * len + j] = bitcast<u32>(softmax_value(shifted, r.total, log_total, log_softmax));
    }
}

// Each row's log-sum-exp: the softmax's reading pass alone (cross-entropy's, which then needs
// no [N, C] output). A row whose maximum is infinite gives that maximum.
@compute @workgroup_size(256)
fn logsumexp_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var cache: array<f32, CACHED>;
    let r = softmax_row(wid, lid, &cache);
    if (r.valid && r.lane == 0u) {
        let infinite = abs(r.shift) == bitcast<f32>(0x7f800000u);
        out[r.row] = bitcast<u32>(select(r.shift + log(r.total), r.shift, infinite));
    }
}

fn softmax_value(shifted: f32, total: f32, log_total: f32, log_softmax: bool) -> f32 {
    if (log_softmax) {
        return shifted - log_total;
    }
    return exp(shifted) / total;
}

// The input gradient of softmax (y * (g - sum(g * y))) or log-softmax (g - y * sum(g)) from
// the input `a` and the output gradient `g`, the softmax recomputed in registers.
@compute @workgroup_size(256)
fn softmax_backward_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var cache: array<f32, CACHED>;
    let r = softmax_row(wid, lid, &cache);
    let len = p[1];
    let segment = p[5];
    let log_softmax = p[2] == 1u;
    let grad_base = p[6] + r.row * len;
    var grads: array<f32, CACHED>;
    var s = 0.0;
    for (var c = 0u; c < CACHED; c++) {
        let j = r.lane + c * segment;
        grads[c] = 0.0;
        if (r.valid && j < len) {
            grads[c] = bitcast<f32>(g[grad_base + j]);
            cache[c] = exp(cache[c]) / r.total;
            s += select(grads[c] * cache[c], grads[c], log_softmax);
        }
    }
    for (var j = r.lane + CACHED * segment; r.valid && j < len; j += segment) {
        let y = exp(bitcast<f32>(a[r.base + j]) - r.shift) / r.total;
        let gj = bitcast<f32>(g[grad_base + j]);
        s += select(gj * y, gj, log_softmax);
    }
    let total_grad = segment_reduce(s, lid, segment, SUM);
    if (!r.valid) {
        return;
    }
    for (var c = 0u; c < CACHED; c++) {
        let j = r.lane + c * segment;
        if (j < len) {
            out[r.row * len + j] = bitcast<u32>(softmax_grad(cache[c], grads[c], total_grad, log_softmax));
        }
    }
    for (var j = r.lane + CACHED * segment; j < len; j += segment) {
        let y = exp(bitcast<f32>(a[r.base + j]) - r.shift) / r.total;
        let gj = bitcast<f32>(g[grad_base + j]);
        out[r.row * len + j] = bitcast<u32>(softmax_grad(y, gj, total_grad, log_softmax));
    }
}

fn softmax_grad(y: f32, grad: f32, total_grad: f32, log_softmax: bool) -> f32 {
    if (log_softmax) {
        return grad - y * total_grad;
    }
    return y * (grad - total_grad);
}

// Column sums of a contiguous [rows, cols] block (a reduction over leading axes, such as a
// bias gradient over the batch). A workgroup of 32 columns by 8 row lanes adds `chunk` rows
// of its columns: lane y takes every 8th row, so the 32 words of a row are read by
// neighbouring invocations, and the lanes' partial sums meet in workgroup memory. Grid x
// counts groups of 32 columns, grid y chunks; the host adds the chunk sums with another pass
// while there is more than one. Eight lanes a column keep eight times more loads in flight
// than one invocation a column, whose long serial loops left the GPU waiting on memory.
// Parameters: 0 rows, 1 cols, 2 rows per chunk, 3 input offset.
@compute @workgroup_size(32, 8)
fn sum_columns(
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(local_invocation_id) lid: vec3<u32>,
) {
    let cols = p[1];
    let col = wid.x * 32u + lid.x;
    let first = wid.y * p[2];
    let last = min(p[0], first + p[2]);
    var total = 0.0;
    if (col < cols) {
        for (var r = first + lid.y; r < last; r += 8u) {
            total += bitcast<f32>(a[p[3] + r * cols + col]);
        }
    }
    values[lid.y * 32u + lid.x] = total;
    workgroupBarrier();
    if (lid.y == 0u && col < cols) {
        var sum = 0.0;
        for (var lane = 0u; lane < 8u; lane++) {
            sum += values[lane * 32u + lid.x];
        }
        out[wid.y * cols + col] = bitcast<u32>(sum);
    }
}
