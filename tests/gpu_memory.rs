//! The GPU buffer pool: a steady training loop stops creating buffers after its first steps,
//! and what it holds is accounted for. (Its own test binary: the counters are per device.)

mod common;

use common::gpu::TinyMlp;

#[test]
fn a_steady_training_loop_reuses_its_buffers() {
    let _serial = common::gpu::serial();
    let Some((device, gpu)) = common::gpu::gpu_and_handle() else {
        return;
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

#[test]
fn the_in_use_peak_counts_live_tensors_at_their_busiest() {
    let _serial = common::gpu::serial();
    let Some((device, gpu)) = common::gpu::gpu_and_handle() else {
        return;
    };
    gpu.reset_memory_peak();
    let base = gpu.memory().in_use;
    // Two live tensors of 1 MiB each (a size class of its own), then none.
    let make = || {
        rumus::DynTensor::zeros(&[1 << 18], rumus::DType::F32)
            .unwrap()
            .to(&device)
            .unwrap()
    };
    let (a, b) = (make(), make());
    let busy = gpu.memory();
    drop((a, b));
    let after = gpu.memory();
    assert!(busy.in_use >= base + (2 << 20), "{busy:?}");
    assert_eq!(after.in_use_peak, busy.in_use_peak);
    assert!(
        after.in_use_peak >= base + (2 << 20) && after.in_use == base,
        "{after:?}"
    );
    gpu.reset_memory_peak();
    assert_eq!(gpu.memory().in_use_peak, base);
}
