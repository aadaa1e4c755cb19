//! `activation_dropout`: an activation and the dropout after it as one op. With the same seed
//! it gives the two ops' values and gradients exactly on the CPU, finite differences agree
//! with its gradient, and on a GPU (one kernel each way) it drops the same elements as the
//! CPU and matches its values.

mod common;

use common::randn;
use rumus::autograd::{GradcheckOptions, gradcheck};
use rumus::nn::functional::{activation_dropout, dropout};
use rumus::ops::unary::UnaryOp;
use rumus::{DType, DynTensor};

/// Every activation whose gradient is one pass (the fused ones), and softplus, which runs as
/// the two ops.
const ACTIVATIONS: [UnaryOp; 8] = [
    UnaryOp::Relu,
    UnaryOp::LeakyRelu(0.1),
    UnaryOp::Sigmoid,
    UnaryOp::Tanh,
    UnaryOp::Gelu,
    UnaryOp::GeluTanh,
    UnaryOp::Silu,
    UnaryOp::Softplus {
        beta: 1.0,
        threshold: 20.0,
    },
];

/// Output and input gradient of `f(x)` weighted by `weights` (so each element's gradient
/// differs), with the generator at `seed`.
fn forward_backward(
    x: &DynTensor,
    weights: &DynTensor,
    seed: u64,
    f: impl Fn(&DynTensor) -> DynTensor,
) -> (DynTensor, DynTensor) {
    let leaf = x.detach().requires_grad_().unwrap();
    rumus::manual_seed(seed);
    let out = f(&leaf);
    let loss = out.mul(weights).unwrap().sum_all().unwrap();
    let grads = loss.backward().unwrap();
    (out.detach(), grads.grad(&leaf).unwrap().clone())
}

fn values(t: &DynTensor) -> Vec<f32> {
    t.to_vec::<f32>().unwrap()
}

#[test]
fn one_op_gives_the_values_and_gradients_of_the_two() {
    let _serial = common::gpu::serial();
    // A transposed view: the draws follow the output's logical order in both forms.
    let x = randn(&[37, 50], 1)
        .to_dtype(DType::F32)
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let weights = randn(&[50, 37], 2).to_dtype(DType::F32).unwrap();
    for op in ACTIVATIONS {
        let fused = forward_backward(&x, &weights, 7, |x| {
            activation_dropout(x, op, 0.3, true).unwrap()
        });
        let apart = forward_backward(&x, &weights, 7, |x| {
            dropout(&x.unary(op).unwrap(), 0.3, true).unwrap()
        });
        assert_eq!(values(&fused.0), values(&apart.0), "{op:?}: output");
        assert_eq!(values(&fused.1), values(&apart.1), "{op:?}: gradient");
        // Dropped: zero where the activation alone is not (ReLU zeroes negatives too).
        let alone = values(&x.unary(op).unwrap());
        let dropped = values(&fused.0)
            .iter()
            .zip(&alone)
            .filter(|&(&v, &a)| v == 0.0 && a != 0.0)
            .count();
        let nonzero = alone.iter().filter(|&&a| a != 0.0).count() as f64;
        let rate = dropped as f64 / nonzero;
        assert!((rate - 0.3).abs() < 0.07, "{op:?}: dropped {rate}");
    }
}

#[test]
fn evaluation_mode_and_the_edge_probabilities_are_the_activation_alone_or_zeros() {
    let x = randn(&[6, 5], 3).to_dtype(DType::F32).unwrap();
    let gelu = x.gelu().unwrap().to_vec::<f32>().unwrap();
    for (p, training) in [(0.3, false), (0.0, true)] {
        let out = activation_dropout(&x, UnaryOp::Gelu, p, training).unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), gelu);
    }
    let all = activation_dropout(&x, UnaryOp::Gelu, 1.0, true).unwrap();
    assert!(all.to_vec::<f32>().unwrap().iter().all(|&v| v == 0.0));
    for bad in [-0.1, 1.5, f64::NAN] {
        let error = activation_dropout(&x, UnaryOp::Gelu, bad, true)
            .unwrap_err()
            .to_string();
        assert!(error.contains("outside [0, 1]"), "{error}");
    }
    let integers = DynTensor::from_vec(vec![1i64, 2], &[2]).unwrap();
    assert!(activation_dropout(&integers, UnaryOp::Relu, 0.5, true).is_err());
}

#[test]
fn gradients_match_finite_differences() {
    let _serial = common::gpu::serial();
    // Smooth activations (finite differences across ReLU's kink would not be a derivative);
    // the seed is set inside, so every evaluation draws the same elements.
    for op in [UnaryOp::Gelu, UnaryOp::Tanh, UnaryOp::Silu] {
        let f = move |t: &[DynTensor]| {
            rumus::manual_seed(9);
            activation_dropout(&t[0], op, 0.4, true)?
                .mul(&t[1])?
                .sum_all()
        };
        let inputs = [randn(&[4, 9], 4), randn(&[4, 9], 5)];
        gradcheck(f, &inputs, GradcheckOptions::default()).unwrap();
    }
}

#[test]
fn on_a_gpu_one_kernel_drops_the_cpu_elements_and_matches_its_values() {
    let Some(device) = common::gpu::gpu() else {
        return;
    };
    let _serial = common::gpu::serial();
    let x = common::gpu::tensor(&[64, 96], 6);
    let weights = common::gpu::tensor(&[64, 96], 7);
    let (x_gpu, weights_gpu) = (x.to(&device).unwrap(), weights.to(&device).unwrap());
    for op in ACTIVATIONS {
        let run = |x: &DynTensor, weights: &DynTensor| {
            forward_backward(x, weights, 13, |x| {
                activation_dropout(x, op, 0.25, true).unwrap()
            })
        };
        let (cpu_out, cpu_grad) = run(&x, &weights);
        let (gpu_out, gpu_grad) = run(&x_gpu, &weights_gpu);
        let zeros = |t: &DynTensor| -> Vec<bool> { values(t).iter().map(|&e| e == 0.0).collect() };
        assert_eq!(zeros(&cpu_out), zeros(&gpu_out), "{op:?}: dropped elements");
        common::gpu::assert_close(&format!("{op:?} output"), &cpu_out, &gpu_out);
        common::gpu::assert_close(&format!("{op:?} gradient"), &cpu_grad, &gpu_grad);
    }
}
