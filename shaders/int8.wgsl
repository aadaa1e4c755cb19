// Int8 inference on the GPU (nn::quantized::QuantizedLinear on GPU tensors): rows of f32
// activations quantized symmetrically to int8, four to a word, then their products with the
// layer's int8 weights (also four to a word) by dot4I8Packed into exact i32 sums, scaled
// back to f32 with the row's and the output's scales and the bias. The same arithmetic as
// the CPU path (backend/cpu/int8.rs, nn/quantized.rs), including rounding half away from
// zero and NaN scales for rows holding a NaN or an infinity.
//
// Parameters (binding 0): 0 rows, 1 columns, 2 words per row (columns / 4 rounded up),
// 3 outputs per row, 4 threads per grid row (int8_linear).

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> q: array<u32>;
@group(0) @binding(3) var<storage, read_write> row_scale: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<u32>;
@group(0) @binding(5) var<storage, read> w_scale: array<f32>;
@group(0) @binding(6) var<storage, read> bias: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;

var<workgroup> peaks: array<f32, 256>;

fn not_finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) == 0x7f800000u;
}

// `v * inverse` rounded half away from zero, clamped to +-127 (as nn/quantized.rs).
fn quantize(v: f32, inverse: f32) -> i32 {
    let r = clamp(v * inverse, -127.0, 127.0);
    return i32(trunc(r + select(0.5, -0.5, r < 0.0)));
}

// One workgroup per row (the grid may hold a few more workgroups than rows: they only join
// the barriers). A non-finite value makes the row's peak -1, which the reduction keeps.
@compute @workgroup_size(256)
fn quantize_rows(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let row = wg.y * groups.x + wg.x;
    let valid = row < p[0];
    let cols = p[1];
    var peak = 0.0;
    var bad = false;
    if valid {
        for (var c = lid; c < cols; c += 256u) {
            let v = x[row * cols + c];
            bad = bad || not_finite(v);
            peak = max(peak, abs(v));
        }
    }
    peaks[lid] = select(peak, -1.0, bad);
    workgroupBarrier();
    for (var half = 128u; half > 0u; half >>= 1u) {
        if lid < half {
            let a = peaks[lid];
            let b = peaks[lid + half];
            peaks[lid] = select(max(a, b), -1.0, a < 0.0 || b < 0.0);
        }
        workgroupBarrier();
    }
    let top = peaks[0];
    var scale = 1.0;
    if top < 0.0 {
        scale = bitcast<f32>(0x7fc00000u);
    } else if top > 0.0 {
        scale = top / 127.0;
    }
    let inverse = select(1.0 / scale, 0.0, top < 0.0);
    if !valid {
        return;
    }
    let words = p[2];
    for (var t = lid; t < words; t += 256u) {
        var lanes = vec4<i32>(0);
        for (var i = 0u; i < 4u; i++) {
            let c = 4u * t + i;
            if c < cols {
                lanes[i] = quantize(x[row * cols + c], inverse);
            }
        }
        q[row * words + t] = pack4xI8(lanes);
    }
    if lid == 0u {
        row_scale[row] = scale;
    }
}

// One thread per output [row, j].
@compute @workgroup_size(256)
fn int8_linear(@builtin(global_invocation_id) gid: vec3<u32>) {
    let n = p[3];
    let index = gid.y * p[4] + gid.x;
    if index >= p[0] * n {
        return;
    }
    let row = index / n;
    let j = index % n;
    let words = p[2];
    var acc = 0i;
    for (var t = 0u; t < words; t++) {
        acc += dot4I8Packed(q[row * words + t], w[j * words + t]);
    }
    out[index] = f32(acc) * (row_scale[row] * w_scale[j]) + bias[j];
}
