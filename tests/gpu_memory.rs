//! The GPU buffer pool: a steady training loop stops creating buffers after its first steps,
//! and what it holds is accounted for. (Its own test binary: the counters are per device.)

mod common;

use common::gpu::{gpu, tensor};
use rumus::nn::{CrossEntropyOptions, Linear, Module, cross_entropy};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::{Device, DynTensor, no_grad};

#[test]
fn a_steady_training_loop_reuses_its_buffers() {
    let Some(device) = gpu() else { return };
    let Device::Gpu(gpu) = &device else {
        unreachable!()
    };
    let (l1, l2) = {
        let _on = device.set_default();
        (
            Linear::<20, 64>::new().unwrap(),
            Linear::<64, 5>::new().unwrap(),
        )
    };
    let mut params = l1.parameters();
    params.extend(l2.parameters());
    let mut adam = Adam::new(params, AdamConfig::default()).unwrap();
    let x = tensor(&[32, 20], 1).to(&device).unwrap();
    let labels = DynTensor::from_vec((0..32).map(|i| i % 5).collect::<Vec<i64>>(), &[32]).unwrap();
    let mut step = || {
        let h = l1.forward_dyn(&x).unwrap().relu().unwrap();
        let loss = cross_entropy(
            &l2.forward_dyn(&h).unwrap(),
            &labels,
            &CrossEntropyOptions::default(),
        )
        .unwrap();
        let mut grads = loss.backward().unwrap();
        let _no_grad = no_grad();
        adam.step(&mut grads).unwrap();
        loss.item::<f32>().unwrap()
    };
    for _ in 0..3 {
        step();
    }
    let warm = gpu.memory();
    for _ in 0..5 {
        step();
    }
    let after = gpu.memory();
    assert_eq!(
        after.created, warm.created,
        "steps after the first created buffers: {warm:?} -> {after:?}"
    );
    assert!(after.in_use > 0 && after.peak >= after.in_use + after.pooled);
    gpu.release_pooled();
    assert_eq!(gpu.memory().pooled, 0);
}
