//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod gpu;
pub mod resnet;
pub mod skip;
pub mod smollm2;
pub mod tiny_llama;

use rumus::DynTensor;
use rumus::autograd::{GradcheckOptions, enable_grad, grad_with, gradcheck};
use rumus::rng::Generator;
use rumus::{DType, Result};

/// Standard normal f64 values with a seed per call site.
pub fn randn(dims: &[usize], seed: u64) -> DynTensor {
    DynTensor::randn_with(dims, 0.0, 1.0, DType::F64, &mut Generator::new(seed)).unwrap()
}

/// `sum(sqrt(0 x - 1))`: a NaN term whose gradient is NaN for `x` alone (a loss scaler's
/// overflow in one parameter's gradient).
pub fn nan_term(x: &DynTensor) -> DynTensor {
    x.mul_scalar(0.0)
        .unwrap()
        .add_scalar(-1.0)
        .unwrap()
        .sqrt()
        .unwrap()
        .sum_all()
        .unwrap()
}

/// Positive f64 values in [0.5, 2.0) (domains of log, sqrt, pow).
pub fn positive(dims: &[usize], seed: u64) -> DynTensor {
    DynTensor::uniform_with(dims, 0.5, 2.0, DType::F64, &mut Generator::new(seed)).unwrap()
}

pub fn indices(values: &[i64], dims: &[usize]) -> DynTensor {
    DynTensor::from_vec(values.to_vec(), dims).unwrap()
}

/// First-order check, then a second-order one: the gradient computed with `create_graph`,
/// projected on a random direction, must itself match finite differences.
pub fn check_first_and_second_order(
    name: &str,
    f: impl Fn(&[DynTensor]) -> Result<DynTensor>,
    inputs: Vec<DynTensor>,
) {
    gradcheck(&f, &inputs, GradcheckOptions::default())
        .unwrap_or_else(|e| panic!("{name}: first order: {e}"));
    let out_dims = f(&inputs).unwrap().dims().to_vec();
    let cotangent = randn(&out_dims, 101);
    let directions: Vec<DynTensor> = inputs
        .iter()
        .enumerate()
        .map(|(i, x)| randn(x.dims(), 200 + i as u64))
        .collect();
    let projected_gradient = |xs: &[DynTensor]| -> Result<DynTensor> {
        // Finite differences evaluate this under `no_grad` with plain tensors; the inner
        // gradient still needs a recorded forward pass.
        let _recording = enable_grad();
        let xs: Vec<DynTensor> = xs
            .iter()
            .map(|x| {
                if x.requires_grad() {
                    Ok(x.clone())
                } else {
                    x.clone().requires_grad_()
                }
            })
            .collect::<Result<_>>()?;
        let out = f(&xs)?;
        let refs: Vec<&DynTensor> = xs.iter().collect();
        let grads = grad_with(&[&out], &[&cotangent], &refs, true)?;
        let mut total = DynTensor::scalar(0.0, DType::F64)?;
        for ((g, d), x) in grads.iter().zip(&directions).zip(&xs) {
            // `0 * sum(x)` keeps every input connected: a gradient that does not depend on
            // an input (a linear op) has a zero second derivative, which this term states.
            total = total
                .add(&g.mul(d)?.sum_all()?)?
                .add(&x.sum_all()?.mul_scalar(0.0)?)?;
        }
        Ok(total)
    };
    gradcheck(projected_gradient, &inputs, GradcheckOptions::default())
        .unwrap_or_else(|e| panic!("{name}: second order: {e}"));
}
pub mod fixture_file;
pub mod png;
pub mod scratch;

/// The largest `|a[i] - b[i]|` of two equally long lists.
pub fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "lists of different lengths");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}
