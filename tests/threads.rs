//! Tensors and graphs across threads: gradient ids are global, recording mode is per thread.

mod common;

use std::sync::{Arc, Barrier};
use std::thread;

use common::randn;
use rumus::autograd::no_grad;
use rumus::prelude::*;

/// Mean squared error of a linear model and its gradient, computed independently with plain
/// loops: d/dw mean((Xw - y)^2) = 2/n X^T (Xw - y).
fn reference_gradient(x: &[f64], y: &[f64], w: &[f64], n: usize, d: usize) -> Vec<f64> {
    let residual: Vec<f64> = (0..n)
        .map(|i| (0..d).map(|j| x[i * d + j] * w[j]).sum::<f64>() - y[i])
        .collect();
    (0..d)
        .map(|j| {
            (0..n)
                .map(|i| 2.0 / n as f64 * x[i * d + j] * residual[i])
                .sum()
        })
        .collect()
}

fn train_steps(w: &DynTensor, x: &DynTensor, y: &DynTensor, steps: usize, check: bool) {
    let (n, d) = (x.dims()[0], x.dims()[1]);
    for _ in 0..steps {
        let diff = x.matmul(w).unwrap().sub(y).unwrap();
        let loss = diff.mul(&diff).unwrap().mean_all().unwrap();
        let mut grads = loss.backward().unwrap();
        let g = grads.remove(w).expect("gradient of w");
        if check {
            let expected =
                reference_gradient(&x.to_f64_vec(), &y.to_f64_vec(), &w.to_f64_vec(), n, d);
            for (a, b) in g.to_f64_vec().iter().zip(&expected) {
                assert!((a - b).abs() < 1e-12, "gradient {a} vs reference {b}");
            }
        }
        let _guard = no_grad();
        w.add_scaled_(-0.1, &g).unwrap();
    }
}

#[test]
fn model_built_on_one_thread_trains_on_another() {
    let w = randn(&[3, 1], 1).requires_grad_().unwrap();
    let (x, y) = (randn(&[8, 3], 2), randn(&[8, 1], 3));
    let before = w.to_f64_vec();
    let trained = thread::spawn({
        let w = w.clone();
        move || {
            train_steps(&w, &x, &y, 5, true);
            w.to_f64_vec()
        }
    })
    .join()
    .unwrap();
    assert_ne!(before, trained);
    assert_eq!(w.to_f64_vec(), trained, "the parameter itself was updated");
}

#[test]
fn two_threads_train_independent_graphs_at_once() {
    let run = |seed: u64| {
        let w = randn(&[4, 1], seed).requires_grad_().unwrap();
        train_steps(
            &w,
            &randn(&[16, 4], seed + 1),
            &randn(&[16, 1], seed + 2),
            20,
            true,
        );
        w.to_f64_vec()
    };
    let expected = [run(10), run(20)];
    let start = Arc::new(Barrier::new(2));
    let handles: Vec<_> = [10u64, 20]
        .into_iter()
        .map(|seed| {
            let start = start.clone();
            thread::spawn(move || {
                start.wait();
                run(seed)
            })
        })
        .collect();
    let results: Vec<Vec<f64>> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(results[0], expected[0]);
    assert_eq!(results[1], expected[1]);
}

#[test]
fn no_grad_on_one_thread_does_not_stop_recording_on_another() {
    let inside = Arc::new(Barrier::new(2));
    let done = Arc::new(Barrier::new(2));
    let holder = thread::spawn({
        let (inside, done) = (inside.clone(), done.clone());
        move || {
            let _guard = no_grad();
            inside.wait();
            done.wait();
        }
    });
    inside.wait();
    let w = randn(&[2], 1).requires_grad_().unwrap();
    let recorded = w.exp().unwrap().requires_grad();
    done.wait();
    holder.join().unwrap();
    assert!(recorded);
}
