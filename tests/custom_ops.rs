//! Custom ops (`rumus::ops::custom`): the example's fused swish and a two-input op defined
//! here, checked against finite differences and against the built-in `silu`, their WGSL
//! kernels against their CPU kernels, and every misuse an error rather than a panic or a
//! silently wrong gradient.

mod common;

#[path = "../examples/custom_op/swish.rs"]
mod swish;

use std::sync::Arc;

use common::gpu::{assert_close, serial, tensor};
use common::randn;
use rumus::autograd::{GradcheckOptions, gradcheck};
use rumus::element::Float;
use rumus::ops::custom::{self, CustomOp, Input, Wgsl};
use rumus::{DType, Device, DynTensor, Result};
use swish::{Swish, swish};

/// `sqrt(a^2 + b^2)` of two tensors of one shape, with CPU kernels only.
struct Hypot;

impl CustomOp for Hypot {
    fn name(&self) -> &'static str {
        "hypot"
    }
    fn output_dims(&self, inputs: &[&[usize]]) -> Result<Vec<usize>> {
        match inputs {
            [a, b] if a == b => Ok(a.to_vec()),
            _ => Err(rumus::Error::InvalidArgument {
                op: "hypot",
                message: format!("needs two tensors of one shape, got {inputs:?}"),
            }),
        }
    }
    fn forward<T: Float>(&self, inputs: &[Input<'_, T>], out: &mut [T]) -> Result<()> {
        for ((o, &a), &b) in out.iter_mut().zip(inputs[0].data).zip(inputs[1].data) {
            *o = (a * a + b * b).sqrt();
        }
        Ok(())
    }
    fn backward<T: Float>(
        &self,
        inputs: &[Input<'_, T>],
        output: &[T],
        grad_output: &[T],
        grads: &mut [Option<&mut [T]>],
    ) -> Result<()> {
        for (k, grad) in grads.iter_mut().enumerate() {
            if let Some(grad) = grad.as_deref_mut() {
                for (i, g) in grad.iter_mut().enumerate() {
                    *g = grad_output[i] * inputs[k].data[i] / output[i];
                }
            }
        }
        Ok(())
    }
}

#[test]
fn swish_matches_finite_differences() {
    for beta in [0.25, 1.0, 3.0] {
        gradcheck(
            |x| swish(&x[0], beta),
            &[randn(&[5, 6], 1)],
            GradcheckOptions::default(),
        )
        .unwrap_or_else(|e| panic!("beta {beta}: {e}"));
        // A transposed (non-contiguous) input reaches the kernels as a contiguous copy.
        gradcheck(
            |x| swish(&x[0].transpose(0, 1)?, beta),
            &[randn(&[5, 6], 2)],
            GradcheckOptions::default(),
        )
        .unwrap_or_else(|e| panic!("beta {beta}, transposed: {e}"));
    }
}

/// At `beta = 1`, swish is the built-in `silu`: the same values and the same gradient.
#[test]
fn swish_at_beta_one_is_silu() {
    let x = tensor(&[64], 3).requires_grad_().unwrap();
    let mine = swish(&x, 1.0).unwrap();
    let builtin = x.silu().unwrap();
    let close = |a: &DynTensor, b: &DynTensor| {
        for (a, b) in a.to_f64_vec().iter().zip(b.to_f64_vec()) {
            assert!((a - b).abs() <= 1e-6, "{a} against {b}");
        }
    };
    close(&mine, &builtin);
    let seed = tensor(&[64], 4);
    let g_mine = mine.backward_with(&seed).unwrap();
    let g_builtin = builtin.backward_with(&seed).unwrap();
    close(g_mine.grad(&x).unwrap(), g_builtin.grad(&x).unwrap());
}

#[test]
fn two_inputs_get_their_own_gradients() {
    let inputs = [randn(&[3, 4], 5), randn(&[3, 4], 6)];
    gradcheck(
        |x| custom::apply(&Arc::new(Hypot), &[&x[0], &x[1]]),
        &inputs,
        GradcheckOptions::default(),
    )
    .unwrap();
    // Only `a` requires a gradient: `b` gets none, and `a`'s is what it is with both.
    let a = inputs[0].detach().requires_grad_().unwrap();
    let out = custom::apply(&Arc::new(Hypot), &[&a, &inputs[1]]).unwrap();
    let grads = out.sum_all().unwrap().backward().unwrap();
    assert_eq!(grads.len(), 1);
    let expected = a.div(&out).unwrap();
    assert_eq!(grads.grad(&a).unwrap().to_f64_vec(), expected.to_f64_vec());
    // The same tensor twice: both gradients add up on it.
    let x = randn(&[4], 7).requires_grad_().unwrap();
    let out = custom::apply(&Arc::new(Hypot), &[&x, &x]).unwrap();
    let grads = out.sum_all().unwrap().backward().unwrap();
    let sqrt2 = std::f64::consts::SQRT_2;
    for (g, x) in grads
        .grad(&x)
        .unwrap()
        .to_f64_vec()
        .iter()
        .zip(x.to_f64_vec())
    {
        assert!((g - sqrt2 * x.signum()).abs() < 1e-12, "{g} for {x}");
    }
}

#[test]
fn shape_and_dtype_mistakes_are_errors() {
    let hypot = Arc::new(Hypot);
    let shape = custom::apply(&hypot, &[&randn(&[2, 3], 1), &randn(&[3, 2], 2)]).unwrap_err();
    assert!(
        shape.to_string().contains("two tensors of one shape"),
        "{shape}"
    );
    let f32_input = tensor(&[2, 3], 1);
    let mixed = custom::apply(&hypot, &[&randn(&[2, 3], 1), &f32_input]).unwrap_err();
    assert!(mixed.to_string().contains("different dtypes"), "{mixed}");
    let ints = DynTensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    let int_err = swish(&ints, 1.0).unwrap_err();
    assert!(int_err.to_string().contains("f32 or f64"), "{int_err}");
    let none = custom::apply(&hypot, &[]).unwrap_err();
    assert!(none.to_string().contains("at least one input"), "{none}");
}

#[test]
fn second_derivatives_through_a_custom_op_are_refused() {
    let x = randn(&[4], 8).requires_grad_().unwrap();
    let loss = swish(&x, 1.0).unwrap().sum_all().unwrap();
    let refused = rumus::grad(&[&loss], &[&x], true).unwrap_err();
    assert!(
        refused.to_string().contains("backward of swish")
            && refused.to_string().contains("differentiated again"),
        "{refused}"
    );
    // Without `create_graph`, the same graph back-propagates.
    rumus::grad(&[&loss], &[&x], false).unwrap();
}

#[test]
fn an_input_changed_after_the_forward_is_detected() {
    let x = randn(&[4], 9).requires_grad_().unwrap();
    let loss = swish(&x, 1.0).unwrap().sum_all().unwrap();
    {
        let _guard = rumus::no_grad();
        x.mul_scalar_(2.0).unwrap();
    }
    let stale = loss.backward().unwrap_err();
    assert!(stale.to_string().contains("modified in place"), "{stale}");
}

#[test]
fn gpu_kernels_match_the_cpu_kernels() {
    let _serial = serial();
    let Some(device) = common::gpu::wgpu_only("WGSL custom kernels") else {
        return;
    };
    // One element, a partial workgroup, and more threads than one grid row holds.
    for (n, seed) in [(1, 1), (1000, 2), (65_535 * 256 + 300, 3)] {
        let x = tensor(&[n], seed);
        let seed_grad = tensor(&[n], seed + 10);
        let run = |x: &DynTensor, seed: &DynTensor| {
            let x = x.detach().requires_grad_().unwrap();
            let y = swish(&x, 1.7).unwrap();
            let grads = y.backward_with(seed).unwrap();
            (y, grads.grad(&x).unwrap().clone())
        };
        let (y_cpu, g_cpu) = run(&x, &seed_grad);
        let (y_gpu, g_gpu) = run(&x.to(&device).unwrap(), &seed_grad.to(&device).unwrap());
        assert_close(&format!("swish of {n}"), &y_cpu, &y_gpu);
        assert_close(&format!("swish gradient of {n}"), &g_cpu, &g_gpu);
    }
}

/// A custom op whose WGSL is `source` (entry points `forward` and `backward`), reading
/// `params` from `p[16]` on; its CPU kernels do nothing. To show what given kernels do on a
/// GPU: broken ones, or one that runs long.
struct WgslOnly {
    name: &'static str,
    source: &'static str,
    params: Vec<u32>,
}

impl WgslOnly {
    fn broken(source: &'static str) -> Self {
        WgslOnly {
            name: "broken",
            source,
            params: Vec::new(),
        }
    }
}

impl CustomOp for WgslOnly {
    fn name(&self) -> &'static str {
        self.name
    }
    fn output_dims(&self, inputs: &[&[usize]]) -> Result<Vec<usize>> {
        Ok(inputs[0].to_vec())
    }
    fn forward<T: Float>(&self, _: &[Input<'_, T>], _: &mut [T]) -> Result<()> {
        Ok(())
    }
    fn backward<T: Float>(
        &self,
        _: &[Input<'_, T>],
        _: &[T],
        _: &[T],
        _: &mut [Option<&mut [T]>],
    ) -> Result<()> {
        Ok(())
    }
    fn wgsl(&self) -> Option<Wgsl> {
        Some(Wgsl {
            source: self.source,
            forward: "forward",
            backward: "backward",
        })
    }
    fn wgsl_params(&self) -> Vec<u32> {
        self.params.clone()
    }
}

#[test]
fn gpu_misuse_is_an_error() {
    let _serial = serial();
    let Some(device) = common::gpu::wgpu_only("WGSL custom kernels") else {
        return;
    };
    let x = tensor(&[8], 1).to(&device).unwrap();
    // No WGSL at all: an error, not a hidden trip to the CPU.
    let no_kernels = custom::apply(&Arc::new(Hypot), &[&x, &x]).unwrap_err();
    assert!(
        no_kernels.to_string().contains("no GPU kernels"),
        "{no_kernels}"
    );
    // WGSL that does not parse.
    let garbage = WgslOnly::broken("this is not WGSL");
    let refused = custom::apply(&Arc::new(garbage), &[&x]).unwrap_err();
    assert!(
        refused.to_string().contains("broken: wgpu refused"),
        "{refused}"
    );
    // The input declared writable where the layout binds it read-only.
    let wrong_access = WgslOnly::broken(
        "@group(0) @binding(0) var<storage, read> p: array<u32>;
         @group(0) @binding(1) var<storage, read_write> x: array<f32>;
         @compute @workgroup_size(256)
         fn forward(@builtin(global_invocation_id) gid: vec3<u32>) { x[gid.x] = 0.0; }",
    );
    let refused = custom::apply(&Arc::new(wrong_access), &[&x]).unwrap_err();
    assert!(refused.to_string().contains("`forward`"), "{refused}");
    // f64 inputs have no GPU kernels.
    let f64_on_gpu = randn(&[8], 2).to(&device);
    if let Ok(f64_on_gpu) = f64_on_gpu {
        let refused = swish(&f64_on_gpu, 1.0).unwrap_err();
        assert!(refused.to_string().contains("f64"), "{refused}");
    }
    // The device still works afterwards.
    let ok = custom::apply(&Arc::new(Swish { beta: 1.0 }), &[&x]).unwrap();
    assert_eq!(ok.dims(), &[8]);
    assert_eq!(DType::F32, ok.dtype());
}

/// WGSL whose forward kernel takes each element (a whole number) as the seed of `p[16]` x 256
/// steps of xorshift32 and writes the top 24 bits of the state as a float: a kernel whose
/// run time the caller sets, and whose result `xorshift` gives exactly. 256 steps to an
/// iteration, written out, since lavapipe ends a kernel's loops after 65,535 iterations.
const XORSHIFT_WGSL: &str = "@group(0) @binding(0) var<storage, read> p: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> dy: array<f32>;
@group(0) @binding(4) var<storage, read_write> dx: array<f32>;
fn step(s: u32) -> u32 {
    let a = s ^ (s << 13u);
    let b = a ^ (a >> 17u);
    return b ^ (b << 5u);
}
fn steps8(s: u32) -> u32 {
    return step(step(step(step(step(step(step(step(s))))))));
}
fn steps64(s: u32) -> u32 {
    return steps8(steps8(steps8(steps8(steps8(steps8(steps8(steps8(s))))))));
}
@compute @workgroup_size(256)
fn forward(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * p[1] + gid.x;
    if i >= p[0] { return; }
    var s = u32(x[i]) | 1u;
    for (var r = 0u; r < p[16]; r++) {
        s = steps64(steps64(steps64(steps64(s))));
    }
    y[i] = f32(s >> 8u);
}
@compute @workgroup_size(256)
fn backward(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.y * p[1] + gid.x;
    if i >= p[0] { return; }
    dx[i] = 0.0 * dy[i] * y[i];
}";

fn xorshift(seed: u32, iterations: u32) -> f32 {
    let mut s = seed | 1;
    for _ in 0..iterations * 256 {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
    }
    (s >> 8) as f32
}

/// A kernel that runs past the device's wait limit makes the wait an error that names the
/// limit and the way to find the kernel, not a hang; the kernel itself goes on, and with
/// the limit lifted its result arrives and is right. The limit is zero, so the wait fails
/// unless the kernel finished between its submission and the wait's first look at the
/// queue: an order of events, where a limit of milliseconds raced the kernel's speed (15
/// million dependent steps per invocation take milliseconds even on the fastest GPU).
#[test]
fn a_gpu_kernel_past_the_wait_limit_is_an_error_not_a_hang() {
    let _serial = serial();
    let Some((device, gpu_device)) = common::gpu::gpu_and_handle() else {
        return;
    };
    if std::env::var_os("RUMUS_GPU_TRACE").is_some() {
        eprintln!("skipped: RUMUS_GPU_TRACE waits for every kernel as it is dispatched");
        return;
    }
    // One workgroup, each invocation 15 million dependent steps: about a second on lavapipe,
    // a quarter of one on an H200. One seed for all, so the CPU computes the answer once.
    let iterations = 60_000;
    let op = Arc::new(WgslOnly {
        name: "xorshift",
        source: XORSHIFT_WGSL,
        params: vec![iterations],
    });
    let expected = f64::from(xorshift(12_345, iterations));
    let x = DynTensor::from_vec(vec![12_345.0f32; 256], &[256])
        .unwrap()
        .to(&device)
        .unwrap();
    gpu_device.synchronize().unwrap();

    // Restores the device's limit however the test ends: later tests share the device.
    struct Restore<'a>(
        &'a rumus::backend::gpu::GpuDevice,
        Option<std::time::Duration>,
    );
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            self.0.set_wait_timeout(self.1);
        }
    }
    let restore = Restore(&gpu_device, gpu_device.wait_timeout());
    gpu_device.set_wait_timeout(Some(std::time::Duration::ZERO));
    let y = custom::apply(&op, &[&x]).unwrap();
    let read = y.to(&Device::Cpu);
    drop(restore);
    let error = read.unwrap_err().to_string();
    assert!(
        error.contains("within 0ns while rumus waited for a readback"),
        "{error}"
    );
    assert!(error.contains("RUMUS_GPU_TRACE=1"), "{error}");
    gpu_device.synchronize().unwrap();
    assert!(
        y.to_f64_vec().iter().all(|&v| v == expected),
        "{y:?}, not {expected}"
    );
}

#[test]
fn typed_swish_keeps_its_shape() {
    use rumus::{D, Tensor};
    let x = Tensor::<(D<2>, D<3>)>::from_vec(common::gpu::values(6, 5)).unwrap();
    let y: Tensor<(D<2>, D<3>)> = swish::swish_typed(&x, 1.0).unwrap();
    let expected = x.as_dyn().silu().unwrap().to_f64_vec();
    for (a, b) in y.as_dyn().to_f64_vec().iter().zip(expected) {
        assert!((a - b).abs() <= 1e-6, "{a} against {b}");
    }
}
