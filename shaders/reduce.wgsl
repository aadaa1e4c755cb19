// Row reductions: one workgroup reduces one contiguous row of `len` elements (the host moves
// the reduced axes last and makes them contiguous first). Sum, max, min, argmax, argmin, and
// softmax / log-softmax of each row.
//
// Parameters: 0 rows, 1 row length, 2 op code, 3 workgroups per grid row, 4 input offset.

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

// Reduces `values`/`indices` of the workgroup into slot 0.
fn tree(op: u32, lid: u32) {
    for (var width = WG / 2u; width > 0u; width = width / 2u) {
        workgroupBarrier();
        if (lid < width) {
            let r = combine(op, values[lid], indices[lid], values[lid + width], indices[lid + width]);
            values[lid] = bitcast<f32>(r.x);
            indices[lid] = r.y;
        }
    }
    workgroupBarrier();
}

@compute @workgroup_size(256)
fn reduce_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wid.y * p[3] + wid.x;
    let rows = p[0];
    let len = p[1];
    let op = p[2];
    let valid = row < rows;
    let base = p[4] + row * len;
    var acc = identity(op);
    var at = 0xffffffffu;
    if (valid) {
        for (var j = lid; j < len; j += WG) {
            let r = combine(op, acc, at, bitcast<f32>(a[base + j]), j);
            acc = bitcast<f32>(r.x);
            at = r.y;
        }
    }
    values[lid] = acc;
    indices[lid] = at;
    tree(op, lid);
    if (valid && lid == 0u) {
        if (op == ARGMAX || op == ARGMIN) {
            out[row] = indices[0];
        } else {
            out[row] = bitcast<u32>(values[0]);
        }
    }
}

// Elements of a softmax row each invocation keeps in registers between the passes (rows of
// up to 1024 are read from memory once; longer rows re-read the rest).
const CACHED: u32 = 4u;

// op 0: softmax, 1: log-softmax; max subtracted first so large logits do not overflow.
@compute @workgroup_size(256)
fn softmax_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = wid.y * p[3] + wid.x;
    let valid = row < p[0];
    let len = p[1];
    let base = p[4] + row * len;
    var cache: array<f32, CACHED>;
    var m = identity(MAX);
    if (valid) {
        for (var c = 0u; c < CACHED; c++) {
            let j = lid + c * WG;
            if (j < len) {
                cache[c] = bitcast<f32>(a[base + j]);
                m = max(m, cache[c]);
            }
        }
        for (var j = lid + CACHED * WG; j < len; j += WG) {
            m = max(m, bitcast<f32>(a[base + j]));
        }
    }
    values[lid] = m;
    indices[lid] = 0u;
    tree(MAX, lid);
    let row_max = values[0];
    workgroupBarrier();
    var s = 0.0;
    if (valid) {
        for (var c = 0u; c < CACHED; c++) {
            if (lid + c * WG < len) {
                cache[c] -= row_max;
                s += exp(cache[c]);
            }
        }
        for (var j = lid + CACHED * WG; j < len; j += WG) {
            s += exp(bitcast<f32>(a[base + j]) - row_max);
        }
    }
    values[lid] = s;
    tree(SUM, lid);
    let total = values[0];
    if (valid) {
        let log_total = log(total);
        let log_softmax = p[2] == 1u;
        for (var c = 0u; c < CACHED; c++) {
            let j = lid + c * WG;
            if (j < len) {
                out[row * len + j] = bitcast<u32>(softmax_value(cache[c], total, log_total, log_softmax));
            }
        }
        for (var j = lid + CACHED * WG; j < len; j += WG) {
            let shifted = bitcast<f32>(a[base + j]) - row_max;
            out[row * len + j] = bitcast<u32>(softmax_value(shifted, total, log_total, log_softmax));
        }
    }
}

fn softmax_value(shifted: f32, total: f32, log_total: f32, log_softmax: bool) -> f32 {
    if (log_softmax) {
        return shifted - log_total;
    }
    return exp(shifted) / total;
}

// Column sums of a contiguous [rows, cols] block (a reduction over leading axes, such as a
// bias gradient over the batch): each invocation adds `chunk` rows of one column, so
// neighbouring invocations read neighbouring words; grid y counts chunks, and the host adds
// the chunk sums with another pass while there is more than one.
// Parameters: 0 rows, 1 cols, 2 rows per chunk, 3 input offset.
@compute @workgroup_size(256)
fn sum_columns(@builtin(global_invocation_id) gid: vec3<u32>) {
    let col = gid.x;
    let chunk = gid.y;
    let cols = p[1];
    if (col >= cols) {
        return;
    }
    let first = chunk * p[2];
    let last = min(p[0], first + p[2]);
    var total = 0.0;
    for (var r = first; r < last; r++) {
        total += bitcast<f32>(a[p[3] + r * cols + col]);
    }
    out[chunk * cols + col] = bitcast<u32>(total);
}
