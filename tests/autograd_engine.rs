//! Behaviour of the autograd engine: higher-order gradients, several losses, pruning, threads,
//! and the errors a user can trigger.

mod common;

use common::randn;
use rumus::autograd::{grad, grad_with, no_grad};
use rumus::prelude::*;
use rumus::{AutogradError, Error};

/// loss = sum(tanh(tanh(x W1) W2)) for a 2-layer tanh MLP, f64.
fn mlp_loss(x: &DynTensor, w1: &DynTensor, w2: &DynTensor) -> rumus::Result<DynTensor> {
    x.matmul(w1)?.tanh()?.matmul(w2)?.tanh()?.sum_all()
}

fn flat(ts: &[DynTensor]) -> Vec<f64> {
    ts.iter().flat_map(|t| t.to_f64_vec()).collect()
}

#[test]
fn hessian_vector_product_matches_finite_differences_of_the_gradient() {
    let x = randn(&[5, 3], 1);
    let w1 = randn(&[3, 4], 2).requires_grad_().unwrap();
    let w2 = randn(&[4, 2], 3).requires_grad_().unwrap();
    let (v1, v2) = (randn(&[3, 4], 4), randn(&[4, 2], 5));

    // H v = d/dw (g(w) . v), with g computed under create_graph.
    let loss = mlp_loss(&x, &w1, &w2).unwrap();
    let g = grad(&[&loss], &[&w1, &w2], true).unwrap();
    let g_dot_v = g[0]
        .mul(&v1)
        .unwrap()
        .sum_all()
        .unwrap()
        .add(&g[1].mul(&v2).unwrap().sum_all().unwrap())
        .unwrap();
    let hv = flat(&grad(&[&g_dot_v], &[&w1, &w2], false).unwrap());

    // (g(w + eps v) - g(w - eps v)) / 2 eps
    let eps = 1e-5;
    let gradient_at = |sign: f64| {
        let a = w1
            .detach()
            .add(&v1.mul_scalar(sign * eps).unwrap())
            .unwrap()
            .requires_grad_()
            .unwrap();
        let b = w2
            .detach()
            .add(&v2.mul_scalar(sign * eps).unwrap())
            .unwrap()
            .requires_grad_()
            .unwrap();
        flat(&grad(&[&mlp_loss(&x, &a, &b).unwrap()], &[&a, &b], false).unwrap())
    };
    let (plus, minus) = (gradient_at(1.0), gradient_at(-1.0));
    for (i, h) in hv.iter().enumerate() {
        let numeric = (plus[i] - minus[i]) / (2.0 * eps);
        assert!(
            (h - numeric).abs() <= 1e-4 * numeric.abs().max(1e-3),
            "element {i}: Hv {h} vs finite differences {numeric}"
        );
    }
}

#[test]
fn two_losses_from_one_forward_can_both_be_back_propagated() {
    let w = randn(&[3, 3], 1).requires_grad_().unwrap();
    let h = randn(&[2, 3], 2).matmul(&w).unwrap().tanh().unwrap();
    let first = h.sum_all().unwrap();
    let second = h.mul(&h).unwrap().sum_all().unwrap();
    let g1 = first.backward().unwrap().grad(&w).unwrap().to_f64_vec();
    let g2 = second.backward().unwrap().grad(&w).unwrap().to_f64_vec();
    let both = first
        .add(&second)
        .unwrap()
        .backward()
        .unwrap()
        .grad(&w)
        .unwrap()
        .to_f64_vec();
    for i in 0..both.len() {
        assert!((g1[i] + g2[i] - both[i]).abs() < 1e-12);
    }
    assert!(
        g1.iter().zip(&g2).any(|(a, b)| (a - b).abs() > 1e-6),
        "the two losses have different gradients"
    );
}

/// Gradients of several outputs reaching one input add up in one order on every call: with
/// contributions 1, 1e-8 and -1 an f32 sum is 0 or 1e-8 depending on that order, so any
/// order that changes from call to call (a hash map's, seeded afresh for each map) shows.
#[test]
fn several_outputs_add_their_gradients_in_a_repeatable_order() {
    let x = DynTensor::from_vec(vec![0.5f32], &[1])
        .unwrap()
        .requires_grad_()
        .unwrap();
    let scales = [1.0, 1e-8, -1.0, 1e-8, 1.0, -1.0];
    let gradient = || {
        let outputs: Vec<DynTensor> = scales
            .iter()
            .map(|&c| x.mul_scalar(c).unwrap().sum_all().unwrap())
            .collect();
        let outputs: Vec<&DynTensor> = outputs.iter().collect();
        grad(&outputs, &[&x], false).unwrap()[0]
            .to_vec::<f32>()
            .unwrap()[0]
            .to_bits()
    };
    let first = gradient();
    for call in 1..64 {
        assert_eq!(
            gradient(),
            first,
            "call {call} added the gradients in another order"
        );
    }
}

#[test]
fn backward_visits_only_what_the_loss_depends_on() {
    let x = randn(&[3], 1).requires_grad_().unwrap();
    let saved = randn(&[3], 2);
    // This branch saves `saved`, which is then modified: back-propagating through it fails.
    let unrelated = x.mul(&saved).unwrap().sum_all().unwrap();
    saved.fill_(0.0).unwrap();
    let loss = x.exp().unwrap().sum_all().unwrap();
    let grads = loss.backward().unwrap();
    let expected = x.exp().unwrap().to_f64_vec();
    assert_eq!(grads.grad(&x).unwrap().to_f64_vec(), expected);
    assert!(matches!(
        unrelated.backward(),
        Err(Error::Autograd(AutogradError::VersionMismatch { .. }))
    ));
}

#[test]
fn gradients_of_intermediate_tensors() {
    let x = randn(&[4], 1).requires_grad_().unwrap();
    let h = x.exp().unwrap();
    let loss = h.mul(&h).unwrap().sum_all().unwrap();
    let dh = &grad(&[&loss], &[&h], false).unwrap()[0];
    let expected = h.mul_scalar(2.0).unwrap().to_f64_vec();
    assert_eq!(dh.to_f64_vec(), expected);
}

#[test]
fn gradients_accumulate_across_backward_passes() {
    let w = randn(&[2, 2], 1).requires_grad_().unwrap();
    let loss = |seed| randn(&[3, 2], seed).matmul(&w).unwrap().sum_all().unwrap();
    let mut store = loss(10).backward().unwrap();
    store.merge(loss(11).backward().unwrap()).unwrap();
    let together = loss(10).add(&loss(11)).unwrap().backward().unwrap();
    let (a, b) = (
        store.grad(&w).unwrap().to_f64_vec(),
        together.grad(&w).unwrap().to_f64_vec(),
    );
    assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-12));
    assert!(store.remove(&w).is_some());
    assert!(
        store.remove(&w).is_none(),
        "an optimizer drains its parameter's gradient once"
    );
}

#[test]
fn no_grad_records_nothing() {
    let w = randn(&[2, 2], 1).requires_grad_().unwrap();
    let out = {
        let _guard = no_grad();
        w.matmul(&w).unwrap().exp().unwrap()
    };
    assert!(!out.requires_grad());
    assert!(out.is_leaf());
    assert!(
        w.matmul(&w).unwrap().requires_grad(),
        "recording resumes after the guard drops"
    );
}

#[test]
fn vector_jacobian_product_with_an_explicit_seed() {
    let x = randn(&[3], 1).requires_grad_().unwrap();
    let y = x.mul_scalar(3.0).unwrap();
    let seed = DynTensor::from_vec(vec![1.0f64, 2.0, 3.0], &[3]).unwrap();
    let g = grad_with(&[&y], &[&seed], &[&x], false).unwrap();
    assert_eq!(g[0].to_f64_vec(), vec![3.0, 6.0, 9.0]);
    let store = y.backward_with(&seed).unwrap();
    assert_eq!(store.grad(&x).unwrap().to_f64_vec(), vec![3.0, 6.0, 9.0]);
}

// ---- errors a user can trigger: each is an Err whose message names the problem ----

#[test]
fn boundary_shape_mismatch_is_an_error_naming_axis_and_sizes() {
    let err =
        Tensor::<(Dyn, D<784>)>::from_vec_with_dims(vec![0.0f32; 2 * 512], &[2, 512]).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("axis 1") && message.contains("512") && message.contains("784"),
        "{message}"
    );
    assert!(
        message.contains("[Dyn, 784]"),
        "names the expected typed shape: {message}"
    );

    let err = Tensor::<(Dyn, D<4>)>::from_vec(vec![0.0f32; 10])
        .unwrap_err()
        .to_string();
    assert!(err.contains("10") && err.contains("4"), "{err}");

    let err = DynTensor::from_vec(vec![1.0f32; 5], &[2, 3])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("[2, 3]") && err.contains('6') && err.contains('5'),
        "{err}"
    );
}

#[test]
fn backward_of_a_non_scalar_without_a_seed_is_an_error() {
    let x = randn(&[2, 3], 1).requires_grad_().unwrap();
    let err = x.exp().unwrap().backward().unwrap_err();
    assert!(matches!(
        err,
        Error::Autograd(AutogradError::NonScalarWithoutSeed { .. })
    ));
    let message = err.to_string();
    assert!(
        message.contains("[2, 3]") && message.contains("backward_with"),
        "{message}"
    );
}

#[test]
fn mutation_after_recording_is_an_error() {
    let w = randn(&[3], 1).requires_grad_().unwrap();
    let x = randn(&[3], 2);
    let loss = w.mul(&x).unwrap().sum_all().unwrap();
    x.add_scaled_(1.0, &DynTensor::ones(&[3], DType::F64).unwrap())
        .unwrap();
    let err = loss.backward().unwrap_err();
    assert!(matches!(
        err,
        Error::Autograd(AutogradError::VersionMismatch { op: "mul", .. })
    ));
    assert!(err.to_string().contains("modified in place"), "{err}");
}

#[test]
fn in_place_update_of_a_tracked_tensor_while_recording_is_an_error() {
    let w = randn(&[3], 1).requires_grad_().unwrap();
    let err = w.fill_(0.0).unwrap_err();
    assert!(err.to_string().contains("no_grad"), "{err}");
    let _guard = no_grad();
    w.fill_(0.0).unwrap();
    assert_eq!(w.to_f64_vec(), vec![0.0; 3]);
}

#[test]
fn asking_for_a_gradient_that_does_not_exist_is_an_error() {
    let used = randn(&[2], 1).requires_grad_().unwrap();
    let unused = randn(&[2], 2).requires_grad_().unwrap();
    let constant = randn(&[2], 3);
    let loss = used.exp().unwrap().sum_all().unwrap();
    let store = loss.backward().unwrap();
    let err = store.grad(&unused).unwrap_err().to_string();
    assert!(err.contains("does not depend"), "{err}");
    let err = store.grad(&constant).unwrap_err().to_string();
    assert!(err.contains("requires_grad_"), "{err}");
    let err = grad(&[&loss], &[&unused], false).unwrap_err().to_string();
    assert!(err.contains("do not depend"), "{err}");
    let err = constant
        .sum_all()
        .unwrap()
        .backward()
        .unwrap_err()
        .to_string();
    assert!(err.contains("not connected"), "{err}");
}

#[test]
fn shape_errors_inside_dynamic_code_are_errors() {
    let a = randn(&[2, 3], 1);
    let err = a.matmul(&randn(&[4, 2], 2)).unwrap_err().to_string();
    assert!(
        err.contains("3") && err.contains("4") && err.contains("inner"),
        "{err}"
    );
    let err = a.add(&randn(&[4], 3)).unwrap_err().to_string();
    assert!(err.contains("cannot be broadcast"), "{err}");
    let err = a.sum(&[2], false).unwrap_err().to_string();
    assert!(err.contains("axis 2") && err.contains("rank-2"), "{err}");
    let err = a
        .index_select(0, &DynTensor::from_vec(vec![5i64], &[1]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(err.contains("index 5") && err.contains("size 2"), "{err}");
    let err = a.reshape(&[4, 2]).unwrap_err().to_string();
    assert!(
        err.contains("[4, 2]") && err.contains('8') && err.contains('6'),
        "{err}"
    );
}

#[test]
fn pow_exponent_gradient_is_zero_at_base_zero() {
    let base = DynTensor::from_vec(vec![0.0f64, 2.0], &[2]).unwrap();
    let exponent = DynTensor::from_vec(vec![1.5f64, 3.0], &[2])
        .unwrap()
        .requires_grad_()
        .unwrap();
    let g = grad(
        &[&base.pow(&exponent).unwrap().sum_all().unwrap()],
        &[&exponent],
        false,
    )
    .unwrap();
    let expected = 8.0 * 2f64.ln();
    assert_eq!(g[0].to_f64_vec()[0], 0.0);
    assert!((g[0].to_f64_vec()[1] - expected).abs() < 1e-12);
}

#[test]
fn a_very_deep_graph_is_freed_without_overflowing_the_stack() {
    let x = randn(&[2], 1).requires_grad_().unwrap();
    let mut y = x.clone();
    for _ in 0..100_000 {
        y = y.tanh().unwrap().mul(&x).unwrap();
    }
    drop(y);
}

#[test]
fn accumulating_a_gradient_of_another_shape_is_an_error_and_keeps_the_old_one() {
    let w = randn(&[3], 1).requires_grad_().unwrap();
    let mut store = w.exp().unwrap().sum_all().unwrap().backward().unwrap();
    let before = store.grad(&w).unwrap().to_f64_vec();
    let err = store
        .accumulate(w.id().unwrap(), randn(&[2, 3], 2))
        .unwrap_err();
    assert!(err.to_string().contains("must match"), "{err}");
    assert_eq!(store.grad(&w).unwrap().to_f64_vec(), before);
}
