//! The GPU buffer pool: a steady training loop stops creating buffers after its first steps,
//! and what it holds is accounted for. (Its own test binary: the counters are per device.)

mod common;

use common::gpu::{TinyMlp, gpu};
use rumus::Device;

#[test]
fn a_steady_training_loop_reuses_its_buffers() {
    let Some(device) = gpu() else { return };
    let Device::Gpu(gpu) = &device else {
        unreachable!()
    };
    let mut mlp = TinyMlp::new(&device);
    let mut step = || mlp.step().item::<f32>().unwrap();
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
