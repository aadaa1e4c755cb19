// Element-wise kernels over strided views: unary math, binary arithmetic with broadcasting,
// comparisons, select (where), casts, copies, logical ops and the in-place scaled update.
//
// Every element is a 32-bit word (f32, i32 or bool as u32) read through bitcast, except
// packed f16 (two per word, element 2w in the low half of word w), which only `convert` reads
// and `to_half` writes (`half_bits` comes from half.wgsl, appended when this is compiled). The
// parameter block (binding 0) holds, by word: 0 element count, 1 rank, 2 op code, 3 flags,
// 4-5 two f32 scalars, 6 threads per grid row, 7 dtype code, 8-15 dims, 16-47 the strides of
// up to four operands (8 each), 48-51 their offsets, 52 threads launched, 53-56 dropout's seed
// (two words), probability and scale. Operand k is binding k + 1; the output
// is binding 4 (contiguous, except for `scale_add`, which updates operand 3's view of it).

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
@group(0) @binding(3) var<storage, read> c: array<u32>;
@group(0) @binding(4) var<storage, read_write> out: array<u32>;

const DIMS: u32 = 8u;
const STRIDES: u32 = 16u;
const OFFSETS: u32 = 48u;
// Threads launched by a strided kernel: each handles elements i, i + SPAN, ... (up to four),
// so every load of a subgroup stays coalesced while a thread keeps several loads in flight
// (one element a thread left HBM bandwidth unused on an H200).
const SPAN: u32 = 52u;
const DROP: u32 = 53u;
// Flag (word 3) of `unary` and `binary`: dropout applied to the result (an activation and the
// dropout after it in one pass, and in the backward pass its gradient in one pass too).
const FLAG_DROPOUT: u32 = 4u;

const F32: u32 = 0u;
const I32: u32 = 1u;
const BOOL: u32 = 2u;
const HALF: u32 = 3u;

fn element_index(gid: vec3<u32>) -> u32 {
    return gid.y * p[6] + gid.x;
}

// Storage offsets of element `i` in operands 0..3 (one pass over the axes for all four).
fn offsets(i: u32) -> vec4<u32> {
    var rem = i;
    var o = vec4<u32>(p[OFFSETS], p[OFFSETS + 1u], p[OFFSETS + 2u], p[OFFSETS + 3u]);
    let rank = p[1];
    // Most views merge to one axis (contiguous or evenly strided operands): no division.
    if (rank == 1u) {
        return o + i * vec4<u32>(p[STRIDES], p[STRIDES + 8u], p[STRIDES + 16u], p[STRIDES + 24u]);
    }
    for (var k = 0u; k < rank; k++) {
        let d = rank - 1u - k;
        let size = p[DIMS + d];
        let coord = rem % size;
        rem = rem / size;
        o += coord * vec4<u32>(p[STRIDES + d], p[STRIDES + 8u + d], p[STRIDES + 16u + d], p[STRIDES + 24u + d]);
    }
    return o;
}

fn sigmoid(x: f32) -> f32 {
    if (x >= 0.0) {
        return 1.0 / (1.0 + exp(-x));
    }
    let e = exp(x);
    return e / (1.0 + e);
}

// tanh that cannot overflow inside exp: tanh(15) is 1.0 in f32 already.
fn tanh_safe(x: f32) -> f32 {
    return tanh(clamp(x, -15.0, 15.0));
}

// erf: Taylor series below 1 (f32-exact there), Abramowitz-Stegun 7.1.26 above
// (absolute error below 1.5e-7 where erf is above 0.84).
fn erf_f32(x: f32) -> f32 {
    let ax = abs(x);
    if (ax < 1.0) {
        let x2 = x * x;
        var term = x;
        var sum = x;
        for (var n = 1u; n < 14u; n++) {
            let nf = f32(n);
            term = -term * x2 / nf;
            sum += term / (2.0 * nf + 1.0);
        }
        return 1.1283791670955126 * sum;
    }
    let t = 1.0 / (1.0 + 0.3275911 * ax);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign(x) * (1.0 - poly * exp(-ax * ax));
}

// x^y with the sign rules of powf for negative bases and integral exponents.
fn pow_f32(x: f32, y: f32) -> f32 {
    if (y == 0.0) {
        return 1.0;
    }
    if (x < 0.0) {
        if (y != floor(y)) {
            return bitcast<f32>(0x7fc00000u);
        }
        let r = pow(-x, y);
        if (abs(y % 2.0) == 1.0) {
            return -r;
        }
        return r;
    }
    if (x == 0.0) {
        if (y > 0.0) {
            return 0.0;
        }
        return bitcast<f32>(0x7f800000u);
    }
    return pow(x, y);
}

// Op codes: the `UNARY_*`, `BINARY_*` and `COMPARE_*` constants that
// `backend::gpu::elementwise::op_code_constants` generates from the Rust enums and puts
// in front of this file.
fn unary_op(op: u32, x: f32, s0: f32, s1: f32) -> f32 {
    switch op {
        case UNARY_NEG: { return -x; }
        case UNARY_EXP: { return exp(x); }
        case UNARY_LOG: { return log(x); }
        case UNARY_SQRT: { return sqrt(x); }
        case UNARY_RSQRT: { return inverseSqrt(x); }
        case UNARY_ABS: { return abs(x); }
        case UNARY_SIGN: { return sign(x); }
        case UNARY_ERF: { return erf_f32(x); }
        case UNARY_RELU: { return max(x, 0.0); }
        case UNARY_LEAKY_RELU: { return select(x * s0, x, x > 0.0); }
        case UNARY_SIGMOID: { return sigmoid(x); }
        case UNARY_TANH: { return tanh_safe(x); }
        case UNARY_GELU: { return 0.5 * x * (1.0 + erf_f32(x * 0.70710678118654752)); }
        case UNARY_GELU_TANH: {
            let k = 0.7978845608028654;
            return 0.5 * x * (1.0 + tanh_safe(k * (x + 0.044715 * x * x * x)));
        }
        case UNARY_SILU: { return x * sigmoid(x); }
        case UNARY_SOFTPLUS: {
            // softplus: s0 = beta, s1 = threshold
            if (x * s0 > s1) {
                return x;
            }
            return log(1.0 + exp(x * s0)) / s0;
        }
        case UNARY_POWF: { return pow_f32(x, s0); }
        case UNARY_CLAMP: { return min(max(x, s0), s1); }
        case UNARY_ADD_SCALAR: { return x + s0; }
        case UNARY_MUL_SCALAR: { return x * s0; }
        case UNARY_SIN: { return sin(x); }
        case UNARY_COS: { return cos(x); }
        case UNARY_FLOOR: { return floor(x); }
        case UNARY_LOG1P: {
            // ln(1 + x) loses x's digits where 1 + x rounds; below 1e-4 the series' first
            // three terms are exact to f32.
            if (abs(x) < 1e-4) {
                return x * (1.0 - x * (0.5 - x / 3.0));
            }
            return log(1.0 + x);
        }
        default: { return x; }
    }
}

@compute @workgroup_size(256)
fn unary(@builtin(global_invocation_id) gid: vec3<u32>) {
    let first = element_index(gid);
    // All four loads before any store (the compiler cannot move loads past stores to
    // another buffer it does not know to be distinct).
    var x: array<f32, 4>;
    for (var u = 0u; u < 4u; u++) {
        let i = first + u * p[SPAN];
        if (i < p[0]) {
            x[u] = bitcast<f32>(a[offsets(i).x]);
        }
    }
    for (var u = 0u; u < 4u; u++) {
        let i = first + u * p[SPAN];
        if (i < p[0]) {
            let y = unary_op(p[2], x[u], bitcast<f32>(p[4]), bitcast<f32>(p[5]));
            out[i] = bitcast<u32>(maybe_dropped(i, y));
        }
    }
}

@compute @workgroup_size(256)
fn binary(@builtin(global_invocation_id) gid: vec3<u32>) {
    let first = element_index(gid);
    var x: array<f32, 4>;
    var y: array<f32, 4>;
    for (var u = 0u; u < 4u; u++) {
        let i = first + u * p[SPAN];
        if (i < p[0]) {
            let o = offsets(i);
            x[u] = bitcast<f32>(a[o.x]);
            y[u] = bitcast<f32>(b[o.y]);
        }
    }
    for (var u = 0u; u < 4u; u++) {
        let i = first + u * p[SPAN];
        if (i < p[0]) {
            out[i] = bitcast<u32>(maybe_dropped(i, binary_op(p[2], x[u], y[u], bitcast<f32>(p[4]))));
        }
    }
}

// The ACTIVATION_GRAD_* ops are activation gradients: `x` the output gradient, `y` the
// activation's input, `s` leaky relu's slope (one pass instead of a comparison and a
// select, or three products).
fn binary_op(op: u32, x: f32, y: f32, s: f32) -> f32 {
    switch op {
        case BINARY_ADD: { return x + y; }
        case BINARY_SUB: { return x - y; }
        case BINARY_MUL: { return x * y; }
        case BINARY_DIV: { return x / y; }
        case ACTIVATION_GRAD_RELU: { return select(0.0, x, y > 0.0); }
        case ACTIVATION_GRAD_LEAKY_RELU: { return select(x * s, x, y > 0.0); }
        case ACTIVATION_GRAD_SIGMOID: {
            let sy = sigmoid(y);
            return x * (sy * (1.0 - sy));
        }
        case ACTIVATION_GRAD_TANH: {
            let ty = tanh_safe(y);
            return x * (1.0 - ty * ty);
        }
        case ACTIVATION_GRAD_GELU: {
            // gelu: Phi(y) + y phi(y)
            let cdf = 0.5 * (1.0 + erf_f32(y * 0.70710678118654752));
            return x * (cdf + y * 0.3989422804014327 * exp(-0.5 * y * y));
        }
        case ACTIVATION_GRAD_GELU_TANH: {
            // gelu_tanh: 0.5 (1 + t) + 0.5 y (1 - t^2) k (1 + 3 c y^2), t = tanh(k (y + c y^3))
            let k = 0.7978845608028654;
            let t = tanh_safe(k * (y + 0.044715 * y * y * y));
            let inner = k * (1.0 + 3.0 * 0.044715 * y * y);
            // Where t saturates the second term is 0 (not 0 * inf for huge y).
            let slope = select(0.5 * y * (1.0 - t * t) * inner, 0.0, t * t >= 1.0);
            return x * (0.5 * (1.0 + t) + slope);
        }
        case ACTIVATION_GRAD_SILU: {
            // silu: s (1 + y (1 - s))
            let sy = sigmoid(y);
            return x * (sy * (1.0 + y * (1.0 - sy)));
        }
        default: { return pow_f32(x, y); }
    }
}

fn compare_f32(op: u32, x: f32, y: f32) -> bool {
    switch op {
        case COMPARE_EQ: { return x == y; }
        case COMPARE_NE: { return x != y; }
        case COMPARE_LT: { return x < y; }
        case COMPARE_LE: { return x <= y; }
        case COMPARE_GT: { return x > y; }
        default: { return x >= y; }
    }
}

fn compare_i32(op: u32, x: i32, y: i32) -> bool {
    switch op {
        case COMPARE_EQ: { return x == y; }
        case COMPARE_NE: { return x != y; }
        case COMPARE_LT: { return x < y; }
        case COMPARE_LE: { return x <= y; }
        case COMPARE_GT: { return x > y; }
        default: { return x >= y; }
    }
}

@compute @workgroup_size(256)
fn compare(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = element_index(gid); i < p[0]; i += p[SPAN]) {
        let o = offsets(i);
        var r: bool;
        if (p[7] == F32) {
            r = compare_f32(p[2], bitcast<f32>(a[o.x]), bitcast<f32>(b[o.y]));
        } else {
            // i32 and bool (0/1) order the same way as signed integers
            r = compare_i32(p[2], bitcast<i32>(a[o.x]), bitcast<i32>(b[o.y]));
        }
        out[i] = select(0u, 1u, r);
    }
}

// out = a ? b : c, any dtype (the words are copied).
@compute @workgroup_size(256)
fn choose(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = element_index(gid); i < p[0]; i += p[SPAN]) {
        let o = offsets(i);
        out[i] = select(c[o.z], b[o.y], a[o.x] != 0u);
    }
}

// op 0: and, 1: or, 2: not (of a)
@compute @workgroup_size(256)
fn logical(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = element_index(gid); i < p[0]; i += p[SPAN]) {
        let o = offsets(i);
        let x = a[o.x] != 0u;
        var r: bool;
        switch p[2] {
            case 0u: { r = x && (b[o.y] != 0u); }
            case 1u: { r = x || (b[o.y] != 0u); }
            default: { r = !x; }
        }
        out[i] = select(0u, 1u, r);
    }
}

// Element `o` of operand a (dtype `src_type`) as f32 (exact for f16, bool and small ints).
fn load_f32(src_type: u32, o: u32) -> f32 {
    if (src_type == HALF) {
        return unpack2x16float(a[o >> 1u])[o & 1u];
    }
    let word = a[o];
    if (src_type == F32) {
        return bitcast<f32>(word);
    }
    return f32(bitcast<i32>(word));
}

// From dtype p[7] to dtype p[2] (not f16: see `to_half`); float to integer truncates toward
// zero.
@compute @workgroup_size(256)
fn convert(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = element_index(gid); i < p[0]; i += p[SPAN]) {
        let o = offsets(i).x;
        let src_type = p[7];
        let dst_type = p[2];
        let value = load_f32(src_type, o);
        var word = 0u;
        if (src_type != HALF) {
            word = a[o];
        }
        var r: u32;
        if (dst_type == F32) {
            r = bitcast<u32>(value);
        } else if (dst_type == I32) {
            if (src_type == F32 || src_type == HALF) {
                r = bitcast<u32>(i32(value));
            } else {
                r = word;
            }
        } else {
            r = select(0u, 1u, value != 0.0);
        }
        out[i] = r;
    }
}

// Operand a (dtype p[7], any view, p[0] elements) as contiguous packed f16: word w holds
// elements 2w and 2w + 1 and is written by one thread, so no two threads share a word; each
// thread writes words a launch apart (`SPAN`), as the strided kernels do.
@compute @workgroup_size(256)
fn to_half(@builtin(global_invocation_id) gid: vec3<u32>) {
    let words = (p[0] + 1u) / 2u;
    let src_type = p[7];
    for (var w = element_index(gid); w < words; w += p[SPAN]) {
        let first = 2u * w;
        let low = half_bits(load_f32(src_type, offsets(first).x));
        var high = 0u;
        if (first + 1u < p[0]) {
            high = half_bits(load_f32(src_type, offsets(first + 1u).x));
        }
        out[w] = low | (high << 16u);
    }
}

// A contiguous copy of a strided view, any dtype but f16. When the innermost axis is
// contiguous and a multiple of four long (attention's heads merged back, [B, H, T, d] read as
// [B, T, H, d]), each invocation copies runs of four: one offset computation, whose divisions
// dominate a copy of a rank-4 view, per four words.
@compute @workgroup_size(256)
fn copy(@builtin(global_invocation_id) gid: vec3<u32>) {
    let rank = p[1];
    if (rank > 1u && p[STRIDES + rank - 1u] == 1u && p[DIMS + rank - 1u] % 4u == 0u) {
        for (var run = element_index(gid); run < p[0] / 4u; run += p[SPAN]) {
            let i = run * 4u;
            let o = offsets(i).x;
            for (var u = 0u; u < 4u; u++) {
                out[i + u] = a[o + u];
            }
        }
        return;
    }
    for (var i = element_index(gid); i < p[0]; i += p[SPAN]) {
        out[i] = a[offsets(i).x];
    }
}

// In place: out[view 3] = out[view 3] * s0 + s1 * a[view 0]; flags bit 0: overwrite (s0 = 0,
// so NaN in the old value does not survive); bit 1: copy the words (any dtype).
@compute @workgroup_size(256)
fn scale_add(@builtin(global_invocation_id) gid: vec3<u32>) {
    for (var i = element_index(gid); i < p[0]; i += p[SPAN]) {
        let o = offsets(i);
        if ((p[3] & 2u) != 0u) {
            out[o.w] = a[o.x];
            continue;
        }
        let src = bitcast<f32>(a[o.x]) * bitcast<f32>(p[5]);
        if ((p[3] & 1u) != 0u) {
            out[o.w] = bitcast<u32>(src);
        } else {
            out[o.w] = bitcast<u32>(bitcast<f32>(out[o.w]) * bitcast<f32>(p[4]) + src);
        }
    }
}

// Every element set to the word in p[4].
@compute @workgroup_size(256)
fn fill(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = element_index(gid);
    if (i >= p[0]) {
        return;
    }
    out[i] = p[4];
}

// Dropout: each element kept and scaled by `scale` (p[DROP + 3]) where its draw
// (dropout_draws.wgsl, seed p[DROP..DROP + 2]) is at or above the drop probability
// (p[DROP + 2]), zeroed elsewhere.
fn keep_scale(i: u32) -> f32 {
    return kept_times(i, p[DROP], p[DROP + 1u], bitcast<f32>(p[DROP + 2u]), bitcast<f32>(p[DROP + 3u]));
}

// Element `i` of a result, dropped out when the launch asks for it.
fn maybe_dropped(i: u32, v: f32) -> f32 {
    if ((p[3] & FLAG_DROPOUT) != 0u) {
        return v * keep_scale(i);
    }
    return v;
}

// out = a * mask over contiguous `a` starting at offset p[OFFSETS]; four elements a thread,
// a launch (p[SPAN]) apart, all loaded before any is stored.
@compute @workgroup_size(256)
fn dropout(@builtin(global_invocation_id) gid: vec3<u32>) {
    let first = element_index(gid);
    var x: array<f32, 4>;
    for (var u = 0u; u < 4u; u++) {
        let i = first + u * p[SPAN];
        if (i < p[0]) {
            x[u] = bitcast<f32>(a[p[OFFSETS] + i]);
        }
    }
    for (var u = 0u; u < 4u; u++) {
        let i = first + u * p[SPAN];
        if (i < p[0]) {
            out[i] = bitcast<u32>(x[u] * keep_scale(i));
        }
    }
}

// The logits' gradient of a cross-entropy over class axis 1 of contiguous logits
// [N, C, D] (D the trailing dims): (exp(x - lse) - [class == target]) * weight, where `b`
// holds (lse, weight) pairs per (n, d), [N, D, 2] f32, and `c` the targets, [N, D] i32.
// Parameters: 0 elements, 1 C, 2 D, 6 threads per grid row, 48-50 offsets of a, b and c,
// 52 threads launched.
@compute @workgroup_size(256)
fn cross_entropy_grad(@builtin(global_invocation_id) gid: vec3<u32>) {
    let first = element_index(gid);
    let classes = p[1];
    let inner = p[2];
    for (var u = 0u; u < 4u; u++) {
        let i = first + u * p[SPAN];
        if (i < p[0]) {
            let n = i / (classes * inner);
            let label = (i / inner) % classes;
            let at = n * inner + i % inner;
            let lse = bitcast<f32>(b[p[OFFSETS + 1u] + 2u * at]);
            let weight = bitcast<f32>(b[p[OFFSETS + 1u] + 2u * at + 1u]);
            let wanted = bitcast<i32>(c[p[OFFSETS + 2u] + at]);
            let hit = select(0.0, 1.0, i32(label) == wanted);
            let x = bitcast<f32>(a[p[OFFSETS] + i]);
            out[i] = bitcast<u32>((exp(x - lse) - hit) * weight);
        }
    }
}

// The loss scaler's unscale and check in one pass: operand a (f32, any view) times the f32
// scalar p[4] into `out`, contiguous; an infinite or NaN element of a or of the result sets
// flags[0]. The test reads the exponent bits, which no assumption about floats can remove.
@group(0) @binding(5) var<storage, read_write> flags: array<atomic<u32>>;

fn non_finite(bits: u32) -> bool {
    return (bits & 0x7f800000u) == 0x7f800000u;
}

@compute @workgroup_size(256)
fn scale_flagging_non_finite(@builtin(global_invocation_id) gid: vec3<u32>) {
    let factor = bitcast<f32>(p[4]);
    var seen = false;
    for (var i = element_index(gid); i < p[0]; i += p[SPAN]) {
        let word = a[offsets(i).x];
        let scaled = bitcast<u32>(bitcast<f32>(word) * factor);
        out[i] = scaled;
        seen = seen || non_finite(word) || non_finite(scaled);
    }
    if (seen) {
        atomicOr(&flags[0], 1u);
    }
}
