// Sliding windows over contiguous [planes, H, W] inputs, one output element per invocation
// (no atomics: each kernel gathers what its element needs). unfold (im2col) writes columns
// [planes, K, L] (K = KH * KW taps, L = OH * OW positions); fold (col2im), its adjoint, sums
// columns back into planes; window_sum / window_spread are the pooling pair; window_argmax
// gives the plane offset of each window's first maximum (the last NaN or else the first maximum wins, as on the CPU; padding never does).
//
// Parameters: 0 output elements, 1 threads per grid row, 2 op (0 unfold, 1 fold,
// 2 window_sum, 3 window_spread, 4 window_argmax), 3 input offset, 4-5 H W, 6-7 KH KW,
// 8-9 strides, 10-11 padding, 12-13 dilation, 14-15 OH OW.

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

fn value(at: u32) -> f32 {
    return bitcast<f32>(src[p[3] + at]);
}

// The input coordinate tap `k` of output coordinate `o` reads along axis `a` (0 rows, 1
// columns), or -1 in the padding.
fn input_coord(a: u32, o: u32, k: u32) -> i32 {
    let c = i32(o * p[8u + a]) - i32(p[10u + a]) + i32(k * p[12u + a]);
    if (c < 0 || c >= i32(p[4u + a])) {
        return -1;
    }
    return c;
}

// The output coordinate whose tap `k` reads input coordinate `c` along axis `a`, or -1.
fn output_coord(a: u32, c: u32, k: u32) -> i32 {
    let shifted = i32(c) + i32(p[10u + a]) - i32(k * p[12u + a]);
    let stride = i32(p[8u + a]);
    if (shifted < 0 || shifted % stride != 0 || shifted / stride >= i32(p[14u + a])) {
        return -1;
    }
    return shifted / stride;
}

fn unfold_at(i: u32) -> f32 {
    let taps = p[6] * p[7];
    let positions = p[14] * p[15];
    let plane = i / (taps * positions);
    let r = i % (taps * positions);
    let tap = r / positions;
    let pos = r % positions;
    let iy = input_coord(0u, pos / p[15], tap / p[7]);
    let ix = input_coord(1u, pos % p[15], tap % p[7]);
    if (iy < 0 || ix < 0) {
        return 0.0;
    }
    return value(plane * p[4] * p[5] + u32(iy) * p[5] + u32(ix));
}

// Sum over the (tap, window) pairs that read input element i: fold reads the columns,
// spread reads the per-window gradient.
fn gather_back(i: u32, per_tap: bool) -> f32 {
    let plane_len = p[4] * p[5];
    let plane = i / plane_len;
    let iy = (i % plane_len) / p[5];
    let ix = i % p[5];
    let positions = p[14] * p[15];
    let taps = p[6] * p[7];
    var total = 0.0;
    for (var ki = 0u; ki < p[6]; ki++) {
        let oy = output_coord(0u, iy, ki);
        if (oy < 0) {
            continue;
        }
        for (var kj = 0u; kj < p[7]; kj++) {
            let ox = output_coord(1u, ix, kj);
            if (ox < 0) {
                continue;
            }
            let pos = u32(oy) * p[15] + u32(ox);
            if (per_tap) {
                total += value(plane * taps * positions + (ki * p[7] + kj) * positions + pos);
            } else {
                total += value(plane * positions + pos);
            }
        }
    }
    return total;
}

// window_sum (as f32 bits) or window_argmax (plane offset) of output element i.
fn reduce_window(i: u32, argmax: bool) -> u32 {
    let positions = p[14] * p[15];
    let plane = i / positions;
    let oy = (i % positions) / p[15];
    let ox = i % p[15];
    let base = plane * p[4] * p[5];
    var total = 0.0;
    var best = bitcast<f32>(0xff800000u);
    var at = 0xffffffffu;
    for (var ki = 0u; ki < p[6]; ki++) {
        let iy = input_coord(0u, oy, ki);
        if (iy < 0) {
            continue;
        }
        for (var kj = 0u; kj < p[7]; kj++) {
            let ix = input_coord(1u, ox, kj);
            if (ix < 0) {
                continue;
            }
            let offset = u32(iy) * p[5] + u32(ix);
            let v = value(base + offset);
            total += v;
            if (at == 0xffffffffu || v > best || v != v) {
                best = v;
                at = offset;
            }
        }
    }
    if (argmax) {
        return at;
    }
    return bitcast<u32>(total);
}

@compute @workgroup_size(256)
fn window(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * p[1] + gid.x;
    if (i >= p[0]) {
        return;
    }
    switch p[2] {
        case 0u: { out[i] = bitcast<u32>(unfold_at(i)); }
        case 1u: { out[i] = bitcast<u32>(gather_back(i, true)); }
        case 2u: { out[i] = reduce_window(i, false); }
        case 3u: { out[i] = bitcast<u32>(gather_back(i, false)); }
        default: { out[i] = reduce_window(i, true); }
    }
}
