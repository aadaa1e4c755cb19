//! Layers against PyTorch: outputs, gradients of inputs and parameters, batch-norm running
//! statistics and evaluation mode. Data: tests/fixtures/layers.txt, written by
//! tests/fixtures/make_layer_fixtures.py.

mod common;

use std::collections::BTreeMap;

use common::fixture_file::{FixtureTensor, assert_close, read_cases};
use rumus::autograd::{grad_with, no_grad};
use rumus::nn::functional::{group_norm, layer_norm, rms_norm};
use rumus::nn::{BatchNorm, Embedding, Module};
use rumus::prelude::*;

type Case = BTreeMap<String, FixtureTensor>;

fn tensor(t: &FixtureTensor) -> DynTensor {
    t.to_tensor()
}

/// Checks `out` and the gradients of `inputs` (by fixture name) against the case.
fn check(name: &str, case: &Case, out: &DynTensor, inputs: &[(&str, &DynTensor)]) {
    assert_close(name, "out", out, &case["out"]);
    let refs: Vec<&DynTensor> = inputs.iter().map(|(_, t)| *t).collect();
    let grads = grad_with(&[out], &[&tensor(&case["cot"])], &refs, false).unwrap();
    for ((key, _), g) in inputs.iter().zip(&grads) {
        assert_close(
            name,
            &format!("grad.{key}"),
            g,
            &case[&format!("grad.{key}")],
        );
    }
}

fn leaf(case: &Case, key: &str) -> DynTensor {
    tensor(&case[&format!("in.{key}")])
        .requires_grad_()
        .unwrap()
}

/// Copies fixture values into layer parameters (as loading a checkpoint would).
fn load(pairs: &[(&DynTensor, &FixtureTensor)]) {
    let _guard = no_grad();
    for (param, value) in pairs {
        param.copy_(&tensor(value)).unwrap();
    }
}

/// A layer with `weight` and `bias` loaded from the case, applied to `in.x`.
fn check_weighted_layer(
    name: &str,
    case: &Case,
    weight: &DynTensor,
    bias: &DynTensor,
    forward: impl Fn(&DynTensor) -> rumus::Result<DynTensor>,
) {
    load(&[(weight, &case["in.weight"]), (bias, &case["in.bias"])]);
    let x = leaf(case, "x");
    let out = forward(&x).unwrap();
    check(
        name,
        case,
        &out,
        &[("x", &x), ("weight", weight), ("bias", bias)],
    );
}

fn check_batch_norm<const C: usize>(name: &str, case: &Case) {
    let layer = BatchNorm::<C>::new().unwrap();
    load(&[
        (&layer.weight, &case["in.weight"]),
        (&layer.bias, &case["in.bias"]),
    ]);
    let x = leaf(case, "x");
    let out = layer.forward_dyn(&x).unwrap();
    check(
        name,
        case,
        &out,
        &[("x", &x), ("weight", &layer.weight), ("bias", &layer.bias)],
    );
    assert_close(
        name,
        "running_mean",
        &layer.running_mean,
        &case["running_mean"],
    );
    assert_close(
        name,
        "running_var",
        &layer.running_var,
        &case["running_var"],
    );
    layer.eval();
    let eval_out = layer.forward_dyn(&tensor(&case["in.eval_x"])).unwrap();
    assert_close(name, "eval.out", &eval_out, &case["eval.out"]);
}

#[test]
fn layers_match_pytorch() {
    let cases = read_cases(include_str!("fixtures/layers.txt"));
    assert_eq!(cases.len(), 8);
    for (name, case) in &cases {
        match name.as_str() {
            "layer_norm" => {
                let (x, w, b) = (leaf(case, "x"), leaf(case, "weight"), leaf(case, "bias"));
                let out = layer_norm(&x, Some(&w), Some(&b), 1e-5).unwrap();
                check(name, case, &out, &[("x", &x), ("weight", &w), ("bias", &b)]);
            }
            "rms_norm" => {
                let (x, w) = (leaf(case, "x"), leaf(case, "weight"));
                let out = rms_norm(&x, Some(&w), 1e-6).unwrap();
                check(name, case, &out, &[("x", &x), ("weight", &w)]);
            }
            "group_norm" => {
                let (x, w, b) = (leaf(case, "x"), leaf(case, "weight"), leaf(case, "bias"));
                let out = group_norm(&x, 2, Some(&w), Some(&b), 1e-5).unwrap();
                check(name, case, &out, &[("x", &x), ("weight", &w), ("bias", &b)]);
            }
            "conv_transpose2d" => {
                let layer = rumus::nn::ConvTranspose2d::<3, 2, 3>::with_options(2, 1, 1).unwrap();
                check_weighted_layer(
                    name,
                    case,
                    &layer.weight,
                    layer.bias.as_ref().unwrap(),
                    |x| layer.forward_dyn(x),
                );
            }
            "conv1d" => {
                let layer = rumus::nn::Conv1d::<3, 4, 3>::with_options(2, 1, 2).unwrap();
                check_weighted_layer(
                    name,
                    case,
                    &layer.weight,
                    layer.bias.as_ref().unwrap(),
                    |x| layer.forward_dyn(x),
                );
            }
            "batch_norm_2d" => check_batch_norm::<3>(name, case),
            "batch_norm_1d" => check_batch_norm::<4>(name, case),
            "embedding" => {
                let layer = Embedding::<6, 3>::new().unwrap();
                load(&[(&layer.weight, &case["in.weight"])]);
                let out = layer.forward_dyn(&tensor(&case["idx.ids"])).unwrap();
                check(name, case, &out, &[("weight", &layer.weight)]);
            }
            other => panic!("no rumus implementation for layer case `{other}`"),
        }
    }
}

#[test]
fn embedding_index_out_of_range_is_an_error() {
    let layer = Embedding::<4, 2>::new().unwrap();
    let err = layer
        .forward_dyn(&DynTensor::from_vec(vec![1i64, 4], &[2]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("index 4") && err.contains("size 4"), "{err}");
}

#[test]
fn dropout_scales_kept_values_and_is_the_identity_in_eval() {
    manual_seed(9);
    let dropout = rumus::nn::Dropout::new(0.25).unwrap();
    let x = DynTensor::ones(&[100_000], DType::F32).unwrap();
    let y = dropout.forward_dyn(&x).unwrap().to_vec::<f32>().unwrap();
    let dropped = y.iter().filter(|&&v| v == 0.0).count() as f64 / y.len() as f64;
    // Binomial standard error at n = 1e5, p = 0.25 is 0.0014.
    assert!((dropped - 0.25).abs() < 0.01, "dropped fraction {dropped}");
    assert!(y.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));
    // The gradient is the same mask: 0 where dropped, 1 / (1 - p) where kept.
    let tracked = DynTensor::ones(&[1000], DType::F32)
        .unwrap()
        .requires_grad_()
        .unwrap();
    let out = dropout.forward_dyn(&tracked).unwrap();
    let grads = out.sum_all().unwrap().backward().unwrap();
    let grad = grads.get(&tracked).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(grad, out.to_vec::<f32>().unwrap());
    let ints = DynTensor::from_vec(vec![1i64, 2, 3], &[3]).unwrap();
    assert!(dropout.forward_dyn(&ints).is_err());
    dropout.eval();
    assert_eq!(
        dropout.forward_dyn(&x).unwrap().to_vec::<f32>().unwrap(),
        x.to_vec::<f32>().unwrap()
    );
}

#[test]
fn initialisers_have_the_documented_spread() {
    manual_seed(10);
    let w = DynTensor::zeros(&[256, 128, 3, 3], DType::F32).unwrap();
    let fan_in = 128.0 * 9.0;
    rumus::nn::init::kaiming_uniform_(&w).unwrap();
    let v = w.to_f64_vec();
    let bound = (6.0f64 / fan_in).sqrt();
    assert!(v.iter().all(|x| x.abs() <= bound));
    let var = v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64;
    assert!(
        (var / (2.0 / fan_in) - 1.0).abs() < 0.02,
        "variance {var} vs 2/fan_in"
    );
    rumus::nn::init::xavier_normal_(&w).unwrap();
    let v = w.to_f64_vec();
    let var = v.iter().map(|x| x * x).sum::<f64>() / v.len() as f64;
    let expected = 2.0 / (fan_in + 256.0 * 9.0);
    assert!(
        (var / expected - 1.0).abs() < 0.02,
        "variance {var} vs {expected}"
    );
}
