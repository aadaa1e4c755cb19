//! Optimizers, schedulers and clipping against PyTorch: the first five steps of every
//! optimizer from the same parameters and gradients, learning-rate sequences of every
//! schedule, and `clip_grad_norm`. Data: tests/fixtures/optim.txt, written by
//! tests/fixtures/make_optim_fixtures.py.

mod common;

use std::collections::BTreeMap;

use common::fixture_file::{FixtureTensor, read_cases};
use rumus::optim::*;
use rumus::prelude::*;

type Case = BTreeMap<String, FixtureTensor>;

const RTOL: f64 = 1e-5;
const ATOL: f64 = 1e-6;

fn tensor(t: &FixtureTensor) -> DynTensor {
    let values: Vec<f32> = t.values.iter().map(|&v| v as f32).collect();
    DynTensor::from_vec(values, &t.dims).unwrap()
}

fn assert_close(case: &str, key: &str, actual: &[f64], expected: &[f64]) {
    assert_eq!(actual.len(), expected.len(), "{case}: {key}: length");
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            (a - e).abs() <= ATOL + RTOL * e.abs(),
            "{case}: {key}[{i}]: rumus {a:e}, torch {e:e}"
        );
    }
}

fn make_optimizer(name: &str, params: &[DynTensor]) -> Box<dyn Optimizer> {
    let p = params.to_vec();
    match name {
        "sgd" => Box::new(
            Sgd::new(
                p,
                SgdConfig {
                    lr: 0.1,
                    ..Default::default()
                },
            )
            .unwrap(),
        ),
        "sgd_momentum_dampening_decay" => Box::new(
            Sgd::new(
                p,
                SgdConfig {
                    lr: 0.1,
                    momentum: 0.9,
                    dampening: 0.1,
                    weight_decay: 0.01,
                    nesterov: false,
                },
            )
            .unwrap(),
        ),
        "sgd_nesterov" => Box::new(
            Sgd::new(
                p,
                SgdConfig {
                    lr: 0.1,
                    momentum: 0.9,
                    nesterov: true,
                    ..Default::default()
                },
            )
            .unwrap(),
        ),
        "sgd_param_groups" => {
            let groups = vec![
                ParamGroup::new(vec![p[0].clone()], 0.05).with_weight_decay(0.1),
                ParamGroup::new(vec![p[1].clone()], 0.1),
            ];
            Box::new(
                Sgd::with_groups(
                    groups,
                    SgdConfig {
                        lr: 0.1,
                        momentum: 0.5,
                        ..Default::default()
                    },
                )
                .unwrap(),
            )
        }
        "adam" => Box::new(
            Adam::new(
                p,
                AdamConfig {
                    lr: 0.01,
                    ..AdamConfig::adam()
                },
            )
            .unwrap(),
        ),
        "adam_decay_amsgrad" => Box::new(
            Adam::new(
                p,
                AdamConfig {
                    lr: 0.01,
                    weight_decay: 0.1,
                    amsgrad: true,
                    ..AdamConfig::adam()
                },
            )
            .unwrap(),
        ),
        "adamw" => Box::new(
            Adam::new(
                p,
                AdamConfig {
                    lr: 0.01,
                    weight_decay: 0.1,
                    ..AdamConfig::adamw()
                },
            )
            .unwrap(),
        ),
        "rmsprop" => Box::new(
            Rmsprop::new(
                p,
                RmspropConfig {
                    lr: 0.01,
                    ..Default::default()
                },
            )
            .unwrap(),
        ),
        "rmsprop_centered_momentum_decay" => Box::new(
            Rmsprop::new(
                p,
                RmspropConfig {
                    lr: 0.01,
                    momentum: 0.9,
                    centered: true,
                    weight_decay: 0.01,
                    ..Default::default()
                },
            )
            .unwrap(),
        ),
        "adagrad" => Box::new(
            Adagrad::new(
                p,
                AdagradConfig {
                    lr: 0.1,
                    lr_decay: 0.01,
                    weight_decay: 0.01,
                    initial_accumulator_value: 0.1,
                    ..Default::default()
                },
            )
            .unwrap(),
        ),
        other => panic!("no rumus optimizer for fixture case `{other}`"),
    }
}

fn check_optimizer(name: &str, case: &Case) {
    let params: Vec<DynTensor> = (0..2)
        .map(|i| {
            tensor(&case[&format!("init.p{i}")])
                .requires_grad_()
                .unwrap()
        })
        .collect();
    let mut optimizer = make_optimizer(name, &params);
    for step in 1..=5 {
        let mut grads = GradientStore::new();
        for (i, p) in params.iter().enumerate() {
            grads
                .accumulate(p.id().unwrap(), tensor(&case[&format!("grad.{step}.p{i}")]))
                .unwrap();
        }
        optimizer.step(&mut grads).unwrap();
        for (i, p) in params.iter().enumerate() {
            let key = format!("grad.{step}.p{i}");
            assert_close(
                name,
                &key,
                &grads.grad(p).unwrap().to_f64_vec(),
                &case[&key].values,
            );
        }
        for (i, p) in params.iter().enumerate() {
            let key = format!("after.{step}.p{i}");
            assert_close(name, &key, &p.to_f64_vec(), &case[&key].values);
        }
    }
}

fn check_schedule(name: &str, case: &Case) {
    let param = DynTensor::zeros(&[1], DType::F32)
        .unwrap()
        .requires_grad_()
        .unwrap();
    let mut optimizer = Sgd::new(
        vec![param],
        SgdConfig {
            lr: 0.1,
            ..Default::default()
        },
    )
    .unwrap();
    let expected = &case["lrs"].values;
    let mut lrs = Vec::new();
    macro_rules! run {
        ($schedule:expr) => {{
            let mut scheduler = LrScheduler::new(&mut optimizer, $schedule);
            lrs.push(optimizer.lrs()[0]);
            for _ in 1..expected.len() {
                scheduler.step(&mut optimizer);
                lrs.push(optimizer.lrs()[0]);
            }
        }};
    }
    match name {
        "step_lr" => run!(StepLr {
            step_size: 3,
            gamma: 0.5
        }),
        "exponential_lr" => run!(ExponentialLr { gamma: 0.9 }),
        "cosine_annealing_lr" => run!(CosineAnnealingLr {
            t_max: 10,
            eta_min: 0.001
        }),
        "linear_warmup" => run!(LinearWarmup {
            start_factor: 0.1,
            end_factor: 1.0,
            total_iters: 4
        }),
        "one_cycle_lr" => run!(OneCycleLr::new(0.1, 13).unwrap()),
        other => panic!("no rumus schedule for fixture case `{other}`"),
    }
    // The file stores f32; compare at f32 precision.
    assert_close(
        name,
        "lrs",
        &lrs.iter().map(|&v| v as f32 as f64).collect::<Vec<_>>(),
        expected,
    );
}

fn check_clip(case: &Case) {
    let params: Vec<DynTensor> = (0..2)
        .map(|i| {
            DynTensor::zeros(&case[&format!("grad.p{i}")].dims, DType::F32)
                .unwrap()
                .requires_grad_()
                .unwrap()
        })
        .collect();
    let mut grads = GradientStore::new();
    for (i, p) in params.iter().enumerate() {
        grads
            .accumulate(p.id().unwrap(), tensor(&case[&format!("grad.p{i}")]))
            .unwrap();
    }
    let norm = clip_grad_norm(&mut grads, &params, 0.5).unwrap();
    assert_close("clip_grad_norm", "norm", &[norm], &case["norm"].values);
    for (i, p) in params.iter().enumerate() {
        let key = format!("clipped.p{i}");
        assert_close(
            "clip_grad_norm",
            &key,
            &grads.grad(p).unwrap().to_f64_vec(),
            &case[&key].values,
        );
    }
}

#[test]
fn matches_pytorch_optimizers_schedules_and_clipping() {
    let cases = read_cases(include_str!("fixtures/optim.txt"));
    assert!(
        cases.len() >= 16,
        "every optimizer, schedule and clipping case is present"
    );
    for (name, case) in &cases {
        if case.contains_key("lrs") {
            check_schedule(name, case);
        } else if name == "clip_grad_norm" {
            check_clip(case);
        } else {
            check_optimizer(name, case);
        }
    }
}
