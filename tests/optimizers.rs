//! Optimizer behaviour beyond the update formulas: all-or-nothing steps, frozen parameters,
//! state save and restore, clipping, and several optimizers sharing one backward pass.

mod common;

use common::randn;
use rumus::optim::*;
use rumus::prelude::*;

fn params() -> Vec<DynTensor> {
    vec![
        randn(&[3, 2], 1).requires_grad_().unwrap(),
        randn(&[2], 2).requires_grad_().unwrap(),
    ]
}

fn loss(ps: &[DynTensor], seed: u64) -> DynTensor {
    randn(&[4, 3], seed)
        .matmul(&ps[0])
        .unwrap()
        .add(&ps[1])
        .unwrap()
        .tanh()
        .unwrap()
        .sum_all()
        .unwrap()
}

#[test]
fn a_step_with_a_bad_gradient_changes_nothing() {
    let ps = params();
    let before: Vec<Vec<f64>> = ps.iter().map(DynTensor::to_f64_vec).collect();
    let mut optimizer = Adam::new(ps.clone(), AdamConfig::adam()).unwrap();
    let mut grads = loss(&ps, 3).backward().unwrap();
    // Replace the second gradient by one of the wrong shape.
    grads.remove(&ps[1]);
    grads
        .accumulate(ps[1].id().unwrap(), randn(&[5], 4))
        .unwrap();
    let err = optimizer.step(&mut grads).unwrap_err().to_string();
    assert!(err.contains("[5]") && err.contains("[2]"), "{err}");
    let after: Vec<Vec<f64>> = ps.iter().map(DynTensor::to_f64_vec).collect();
    assert_eq!(before, after, "no parameter was updated");
}

#[test]
fn frozen_or_unused_parameters_are_skipped() {
    let ps = params();
    let unused = randn(&[3], 5).requires_grad_().unwrap();
    let before = unused.to_f64_vec();
    let mut all = ps.clone();
    all.push(unused.clone());
    let mut optimizer = Sgd::new(
        all,
        SgdConfig {
            lr: 0.1,
            momentum: 0.9,
            ..Default::default()
        },
    )
    .unwrap();
    let mut grads = loss(&ps, 6).backward().unwrap();
    optimizer.step(&mut grads).unwrap();
    assert_eq!(unused.to_f64_vec(), before);
}

#[test]
fn restored_state_continues_identically() {
    let run = |restore_at: Option<usize>| {
        let ps = params();
        let mut optimizer = Adam::new(ps.clone(), AdamConfig::adam()).unwrap();
        for step in 0..6 {
            if restore_at == Some(step) {
                let state = optimizer.state_dict().unwrap();
                let mut fresh = Adam::new(ps.clone(), AdamConfig::adam()).unwrap();
                fresh.load_state_dict(&state).unwrap();
                optimizer = fresh;
            }
            let mut grads = loss(&ps, 10 + step as u64).backward().unwrap();
            optimizer.step(&mut grads).unwrap();
        }
        ps.iter()
            .flat_map(DynTensor::to_f64_vec)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        run(None),
        run(Some(3)),
        "bit-identical after a save/restore round trip"
    );
}

#[test]
fn two_optimizers_share_one_backward_pass() {
    let ps = params();
    let mut first = Sgd::new(
        vec![ps[0].clone()],
        SgdConfig {
            lr: 0.1,
            ..Default::default()
        },
    )
    .unwrap();
    let mut second = Adam::new(vec![ps[1].clone()], AdamConfig::adam()).unwrap();
    let mut grads = loss(&ps, 7).backward().unwrap();
    let before: Vec<Vec<f64>> = ps
        .iter()
        .map(|p| grads.grad(p).unwrap().to_f64_vec())
        .collect();
    let second_before = ps[1].to_f64_vec();
    first.step(&mut grads).unwrap();
    assert_eq!(
        ps[1].to_f64_vec(),
        second_before,
        "the first optimizer updated only its own parameter"
    );
    second.step(&mut grads).unwrap();
    // Both gradients are still there, unchanged, to inspect after the step (as in PyTorch).
    for (p, before) in ps.iter().zip(&before) {
        assert_eq!(&grads.grad(p).unwrap().to_f64_vec(), before);
    }
}

#[test]
fn clipping_by_value_and_gradient_accumulation() {
    let ps = params();
    let mut grads = loss(&ps, 8).backward().unwrap();
    grads.merge(loss(&ps, 9).backward().unwrap()).unwrap();
    clip_grad_value(&mut grads, &ps, 0.05).unwrap();
    for p in &ps {
        assert!(
            grads
                .grad(p)
                .unwrap()
                .to_f64_vec()
                .iter()
                .all(|v| v.abs() <= 0.05 + 1e-12)
        );
    }
    let norm = clip_grad_norm(&mut grads, &ps, 1e-3).unwrap();
    assert!(norm > 1e-3);
    let clipped: f64 = ps
        .iter()
        .flat_map(|p| grads.grad(p).unwrap().to_f64_vec())
        .map(|v| v * v)
        .sum::<f64>()
        .sqrt();
    assert!((clipped - 1e-3).abs() < 1e-6, "{clipped}");
}

#[test]
fn parameters_that_need_no_gradient_are_refused() {
    let err = Sgd::new(vec![randn(&[2], 1)], SgdConfig::default())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("requires_grad_"), "{err}");
    let err = Sgd::new(
        params(),
        SgdConfig {
            nesterov: true,
            ..Default::default()
        },
    )
    .err()
    .unwrap()
    .to_string();
    assert!(err.contains("Nesterov"), "{err}");
}

/// [`params`] in f32 (loss scaling is for low-precision gradients), as fresh leaves.
fn f32_params() -> Vec<DynTensor> {
    params()
        .iter()
        .map(|p| p.to_dtype(DType::F32).unwrap().requires_grad_().unwrap())
        .collect()
}

fn f32_loss(ps: &[DynTensor]) -> DynTensor {
    let x = randn(&[4, 3], 5).to_dtype(DType::F32).unwrap();
    let y = x
        .matmul(&ps[0])
        .unwrap()
        .add(&ps[1])
        .unwrap()
        .tanh()
        .unwrap();
    y.mul_scalar(8.0).unwrap().sum_all().unwrap()
}

fn values(ps: &[DynTensor]) -> Vec<Vec<f64>> {
    ps.iter().map(DynTensor::to_f64_vec).collect()
}

#[test]
fn loss_scaling_skips_overflowing_steps_then_takes_the_unscaled_step() {
    let sgd_config = SgdConfig {
        lr: 0.1,
        ..Default::default()
    };
    // The reference: one plain step on the true gradients.
    let reference = f32_params();
    let mut grads = f32_loss(&reference).backward().unwrap();
    let true_grads: Vec<Vec<f64>> = reference
        .iter()
        .map(|p| grads.grad(p).unwrap().to_f64_vec())
        .collect();
    Sgd::new(reference.clone(), sgd_config)
        .unwrap()
        .step(&mut grads)
        .unwrap();

    // 2^127 times gradients of up to ~32 overflows f32; powers of two scale exactly, so once
    // the scale is small enough the unscaled gradients are the true ones, bit for bit.
    let ps = f32_params();
    let start = values(&ps);
    let mut sgd = Sgd::new(ps.clone(), sgd_config).unwrap();
    let mut scaler = GradScaler::with_config(GradScalerConfig {
        init_scale: 2f64.powi(127),
        growth_interval: 1000,
        ..Default::default()
    })
    .unwrap();
    let mut skipped = 0;
    loop {
        let scale = scaler.scale_factor();
        let mut grads = scaler.scale(&f32_loss(&ps)).unwrap().backward().unwrap();
        let stepped = scaler.step(&mut sgd, &mut grads).unwrap();
        scaler.update();
        if !stepped {
            skipped += 1;
            assert_eq!(values(&ps), start, "a skipped step changed the parameters");
            assert_eq!(scaler.scale_factor(), scale * 0.5);
            assert!(skipped < 20, "the scale never came down to a finite range");
            continue;
        }
        let unscaled: Vec<Vec<f64>> = ps
            .iter()
            .map(|p| grads.grad(p).unwrap().to_f64_vec())
            .collect();
        assert_eq!(
            unscaled, true_grads,
            "the gradients left in the store are unscaled"
        );
        assert_eq!(values(&ps), values(&reference));
        assert_eq!(
            scaler.scale_factor(),
            scale,
            "one good step does not grow the scale"
        );
        break;
    }
    assert!(skipped >= 1, "the first scale should have overflowed");
}

#[test]
fn loss_scaling_grows_after_clean_steps_and_backs_off_on_nan() {
    let ps = f32_params();
    let mut sgd = Sgd::new(
        ps.clone(),
        SgdConfig {
            lr: 0.01,
            ..Default::default()
        },
    )
    .unwrap();
    let mut scaler = GradScaler::with_config(GradScalerConfig {
        init_scale: 1024.0,
        growth_interval: 2,
        ..Default::default()
    })
    .unwrap();
    let mut iterate = |loss: DynTensor| {
        let mut grads = scaler.scale(&loss).unwrap().backward().unwrap();
        let stepped = scaler.step(&mut sgd, &mut grads).unwrap();
        scaler.update();
        (stepped, scaler.scale_factor())
    };
    assert_eq!(iterate(f32_loss(&ps)), (true, 1024.0));
    assert_eq!(iterate(f32_loss(&ps)), (true, 2048.0));
    // sqrt of a negative number: NaN gradients, whatever the scale.
    let nan_loss = ps[1]
        .mul_scalar(0.0)
        .unwrap()
        .add_scalar(-1.0)
        .unwrap()
        .sqrt()
        .unwrap();
    let before = values(&ps);
    assert_eq!(iterate(nan_loss.sum_all().unwrap()), (false, 1024.0));
    assert_eq!(values(&ps), before);
}

/// With two optimizers, an overflow in one's gradients skips that optimizer's step only (as
/// PyTorch's `GradScaler.step` does); the scale still backs off.
#[test]
fn loss_scaling_skips_only_the_optimizer_whose_gradients_overflowed() {
    let sgd_config = SgdConfig {
        lr: 0.1,
        ..Default::default()
    };
    // NaN gradients for the weight only: sqrt(-1) through a term of ps[0] alone.
    let loss = |ps: &[DynTensor]| f32_loss(ps).add(&common::nan_term(&ps[0])).unwrap();
    // The reference: a plain step of the bias on its true gradient.
    let reference = f32_params();
    let mut grads = loss(&reference).backward().unwrap();
    Sgd::new(vec![reference[1].clone()], sgd_config)
        .unwrap()
        .step(&mut grads)
        .unwrap();

    let ps = f32_params();
    let start = values(&ps);
    let mut weight_sgd = Sgd::new(vec![ps[0].clone()], sgd_config).unwrap();
    let mut bias_sgd = Sgd::new(vec![ps[1].clone()], sgd_config).unwrap();
    let mut scaler = GradScaler::with_config(GradScalerConfig {
        init_scale: 1024.0,
        ..Default::default()
    })
    .unwrap();
    let mut grads = scaler.scale(&loss(&ps)).unwrap().backward().unwrap();
    assert!(!scaler.step(&mut weight_sgd, &mut grads).unwrap());
    assert!(scaler.step(&mut bias_sgd, &mut grads).unwrap());
    scaler.update();
    assert_eq!(ps[0].to_f64_vec(), start[0], "the skipped weight moved");
    assert_eq!(
        ps[1].to_f64_vec(),
        reference[1].to_f64_vec(),
        "the bias took the step on its unscaled gradient"
    );
    assert_eq!(scaler.scale_factor(), 512.0);
}

/// Gradients whose elements are all finite but whose sum overflows f32 are finite: the
/// scaler takes the step (its quick check, one sum per gradient, overflows here and the exact
/// check clears it), as PyTorch's element-wise check would.
#[test]
fn loss_scaling_steps_on_finite_gradients_whose_sum_overflows() {
    let sgd_config = SgdConfig {
        lr: 1e-3,
        ..Default::default()
    };
    // d/dw sum(w * c) = c: two elements of 3e38 each, finite, summing past f32's 3.4e38.
    let c = DynTensor::from_vec(vec![3e38f32, 3e38], &[2]).unwrap();
    let loss = |w: &DynTensor| w.mul(&c).unwrap().sum_all().unwrap();
    let make = || {
        DynTensor::from_vec(vec![1e-30f32, -1e-30], &[2])
            .unwrap()
            .requires_grad_()
            .unwrap()
    };
    let reference = make();
    let mut grads = loss(&reference).backward().unwrap();
    Sgd::new(vec![reference.clone()], sgd_config)
        .unwrap()
        .step(&mut grads)
        .unwrap();

    let w = make();
    let mut sgd = Sgd::new(vec![w.clone()], sgd_config).unwrap();
    let mut scaler = GradScaler::with_config(GradScalerConfig {
        init_scale: 1.0,
        ..Default::default()
    })
    .unwrap();
    let mut grads = scaler.scale(&loss(&w)).unwrap().backward().unwrap();
    assert!(
        scaler.step(&mut sgd, &mut grads).unwrap(),
        "finite gradients were taken for an overflow"
    );
    assert_eq!(w.to_f64_vec(), reference.to_f64_vec());
}

#[test]
fn clipping_after_unscale_sees_the_true_gradients() {
    let reference = f32_params();
    let mut grads = f32_loss(&reference).backward().unwrap();
    let true_norm = clip_grad_norm(&mut grads, &reference, f64::INFINITY).unwrap();

    let ps = f32_params();
    let mut sgd = Sgd::new(ps.clone(), SgdConfig::default()).unwrap();
    let mut scaler = GradScaler::new();
    let mut grads = scaler.scale(&f32_loss(&ps)).unwrap().backward().unwrap();
    assert!(scaler.unscale(&sgd, &mut grads).unwrap());
    assert_eq!(
        clip_grad_norm(&mut grads, &ps, f64::INFINITY).unwrap(),
        true_norm
    );
    let error = scaler.unscale(&sgd, &mut grads).unwrap_err().to_string();
    assert!(error.contains("already unscaled"), "{error}");
    // `step` does not unscale a second time.
    assert!(scaler.step(&mut sgd, &mut grads).unwrap());
}

#[test]
fn a_grad_scaler_with_a_meaningless_config_is_an_error() {
    let bad = [
        GradScalerConfig {
            init_scale: 0.0,
            ..Default::default()
        },
        GradScalerConfig {
            growth_factor: 1.0,
            ..Default::default()
        },
        GradScalerConfig {
            backoff_factor: 1.5,
            ..Default::default()
        },
        GradScalerConfig {
            growth_interval: 0,
            ..Default::default()
        },
    ];
    for config in bad {
        let error = GradScaler::with_config(config).unwrap_err().to_string();
        assert!(error.starts_with("GradScaler:"), "{error}");
    }
}
