// Fused optimizer updates: one pass over parameter, gradient and state.
//
// Adam/AdamW parameters: 0 count, 1 threads per grid row, 2-5 offsets of p, g, m, v,
// 6 step size (lr / (1 - beta1^t)), 7 beta1, 8 beta2, 9 eps, 10 1 / sqrt(1 - beta2^t),
// 11 L2 penalty (Adam's weight_decay), 12 decay factor (AdamW's 1 - lr * weight_decay).

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read_write> param: array<f32>;
@group(0) @binding(2) var<storage, read> grad: array<f32>;
@group(0) @binding(3) var<storage, read_write> m1: array<f32>;
@group(0) @binding(4) var<storage, read_write> m2: array<f32>;

fn f(i: u32) -> f32 {
    return bitcast<f32>(p[i]);
}

@compute @workgroup_size(256)
fn adam(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * p[1] + gid.x;
    if (i >= p[0]) {
        return;
    }
    let pi = p[2] + i;
    let mi = p[4] + i;
    let vi = p[5] + i;
    let x = param[pi];
    let g = grad[p[3] + i] + f(11u) * x;
    let m = f(7u) * m1[mi] + (1.0 - f(7u)) * g;
    let v = f(8u) * m2[vi] + (1.0 - f(8u)) * g * g;
    m1[mi] = m;
    m2[vi] = v;
    param[pi] = x * f(12u) - f(6u) * m / (sqrt(v) * f(10u) + f(9u));
}
