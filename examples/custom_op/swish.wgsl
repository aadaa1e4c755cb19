// The fused swish of examples/custom_op: y = x * sigmoid(beta * x) and its gradient, one
// element per thread. Bindings and parameter words as rumus::ops::custom::Wgsl documents:
// p[0] threads launched, p[1] threads per grid row, p[16] beta (the op's own word).

@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;

fn beta() -> f32 {
    return bitcast<f32>(p[16]);
}

// 1 / (1 + e^-v): for very negative v, e^-v is inf and the quotient 0, as it should be.
fn sigmoid(v: f32) -> f32 {
    return 1.0 / (1.0 + exp(-v));
}

@compute @workgroup_size(256)
fn swish_forward(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * p[1] + gid.x;
    if i >= p[0] {
        return;
    }
    y[i] = x[i] * sigmoid(beta() * x[i]);
}

// dy/dx = s + beta * x * s * (1 - s) with s = sigmoid(beta * x), and x * s is the saved y.
@compute @workgroup_size(256)
fn swish_backward(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * p[1] + gid.x;
    if i >= p[0] {
        return;
    }
    let s = sigmoid(beta() * x[i]);
    dx[i] = dy[i] * (s + beta() * y[i] * (1.0 - s));
}
