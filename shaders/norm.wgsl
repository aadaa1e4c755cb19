// Layer normalisation of contiguous rows, forward and backward, one kernel each.
//
// A row is handled by a segment of `p[2]` invocations (a power of two from 32 to 256) of a
// 256-wide workgroup: short rows share a workgroup instead of leaving most of it idle (one
// workgroup a row with a 256-step tree was ten times PyTorch's time on [8192, 512]), and a
// segment reduces in log2(segment) steps. Invocation `lane` of a segment holds elements
// `lane + c * segment` of its row in registers between the passes, so a row is read once
// (the host sends rows longer than CACHED segments to the composite form instead).
//
// Forward parameters: 0 rows, 1 row length n, 2 segment, 3 workgroups per grid row,
// 4 x offset, 5 weight offset, 6 bias offset, 7 flags (1: weight, 2: bias), 8 eps (f32 bits).
// Backward parameters: 0-5 as forward, 6 grad offset, 7 flags (1: weight, 4: write the input
// gradient to `out`, 8: write grad * xhat to `scaled` for the weight gradient), 8 stats offset.

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
// Each row's mean and 1 / sqrt(var + eps), written forward and read backward.
@group(0) @binding(5) var<storage, read_write> stats: array<f32>;
@group(0) @binding(6) var<storage, read> grad: array<f32>;
@group(0) @binding(7) var<storage, read_write> scaled: array<f32>;

const WG: u32 = 256u;
const CACHED: u32 = 16u;
const HAS_WEIGHT: u32 = 1u;
const HAS_BIAS: u32 = 2u;
const WRITE_INPUT_GRAD: u32 = 4u;
const WRITE_SCALED: u32 = 8u;

var<workgroup> partial: array<vec2<f32>, 256>;

// The sum of `v` over the invocations of each `segment`-wide segment, returned to all of them.
fn segment_sum(v: vec2<f32>, lid: u32, segment: u32) -> vec2<f32> {
    workgroupBarrier(); // the previous sum's readers are done with `partial`
    partial[lid] = v;
    for (var width = segment / 2u; width > 0u; width = width / 2u) {
        workgroupBarrier();
        if (lid % segment < width) {
            partial[lid] += partial[lid + width];
        }
    }
    workgroupBarrier();
    return partial[lid - lid % segment];
}

struct Slot {
    row: u32,
    lane: u32,
    valid: bool,
}

fn slot_of(wid: vec3<u32>, lid: u32) -> Slot {
    let segment = p[2];
    let row = (wid.y * p[3] + wid.x) * (WG / segment) + lid / segment;
    return Slot(row, lid % segment, row < p[0]);
}

fn weight_at(j: u32) -> f32 {
    if ((p[7] & HAS_WEIGHT) != 0u) {
        return weight[p[5] + j];
    }
    return 1.0;
}

@compute @workgroup_size(256)
fn layer_norm_forward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let s = slot_of(wid, lid);
    let n = p[1];
    let segment = p[2];
    let base = p[4] + s.row * n;
    var cache: array<f32, CACHED>;
    var total = 0.0;
    for (var c = 0u; c < CACHED; c++) {
        let j = s.lane + c * segment;
        cache[c] = 0.0;
        if (s.valid && j < n) {
            cache[c] = x[base + j];
            total += cache[c];
        }
    }
    let mean = segment_sum(vec2<f32>(total, 0.0), lid, segment).x / f32(n);
    var squares = 0.0;
    for (var c = 0u; c < CACHED; c++) {
        if (s.valid && s.lane + c * segment < n) {
            let d = cache[c] - mean;
            squares += d * d;
        }
    }
    let variance = segment_sum(vec2<f32>(squares, 0.0), lid, segment).x / f32(n);
    let rstd = inverseSqrt(variance + bitcast<f32>(p[8]));
    if (!s.valid) {
        return;
    }
    if (s.lane == 0u) {
        stats[2u * s.row] = mean;
        stats[2u * s.row + 1u] = rstd;
    }
    for (var c = 0u; c < CACHED; c++) {
        let j = s.lane + c * segment;
        if (j < n) {
            var y = (cache[c] - mean) * rstd * weight_at(j);
            if ((p[7] & HAS_BIAS) != 0u) {
                y += bias[p[6] + j];
            }
            out[s.row * n + j] = y;
        }
    }
}

// dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = grad * weight.
@compute @workgroup_size(256)
fn layer_norm_backward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let s = slot_of(wid, lid);
    let n = p[1];
    let segment = p[2];
    var mean = 0.0;
    var rstd = 0.0;
    if (s.valid) {
        mean = stats[p[8] + 2u * s.row];
        rstd = stats[p[8] + 2u * s.row + 1u];
    }
    var xhat: array<f32, CACHED>;
    var dxhat: array<f32, CACHED>;
    var sums = vec2<f32>(0.0, 0.0);
    for (var c = 0u; c < CACHED; c++) {
        let j = s.lane + c * segment;
        xhat[c] = 0.0;
        dxhat[c] = 0.0;
        if (s.valid && j < n) {
            xhat[c] = (x[p[4] + s.row * n + j] - mean) * rstd;
            let g = grad[p[6] + s.row * n + j];
            dxhat[c] = g * weight_at(j);
            sums += vec2<f32>(dxhat[c], dxhat[c] * xhat[c]);
            if ((p[7] & WRITE_SCALED) != 0u) {
                scaled[s.row * n + j] = g * xhat[c];
            }
        }
    }
    let means = segment_sum(sums, lid, segment) / f32(n);
    if (!s.valid || (p[7] & WRITE_INPUT_GRAD) == 0u) {
        return;
    }
    for (var c = 0u; c < CACHED; c++) {
        let j = s.lane + c * segment;
        if (j < n) {
            out[s.row * n + j] = rstd * (dxhat[c] - means.x - xhat[c] * means.y);
        }
    }
}
