//! Kernel profiling on the GPU (lavapipe in CI). In a test binary of its own: profiling
//! counts every dispatch on the device, so no other test may run kernels meanwhile.

mod common;

use common::gpu::{gpu, tensor};
use rumus::Device;

/// Kernel profiling counts each dispatch under its entry point and times it on the GPU.
#[test]
fn kernel_profile_counts_each_dispatch() {
    let Some(device) = gpu() else { return };
    let Device::Gpu(gpu_device) = &device else {
        unreachable!("gpu() returns a GPU")
    };
    let (a, b) = (
        tensor(&[40, 30], 90).to(&device).unwrap(),
        tensor(&[30, 20], 91),
    );
    let b = b.to(&device).unwrap();
    gpu_device.profile_kernels(true).unwrap();
    let product = a.matmul(&b).unwrap();
    let _twice = product.matmul(&b.transpose(0, 1).unwrap()).unwrap();
    let _softmax = product.softmax(-1).unwrap();
    let times = gpu_device.kernel_times().unwrap();
    gpu_device.profile_kernels(false).unwrap();
    let find = |entry: &str| times.iter().find(|(e, _)| *e == entry).map(|(_, t)| *t);
    let products = find("matmul_tiled").expect("the products were profiled");
    assert_eq!(products.dispatches, 2);
    assert!(products.seconds > 0.0, "{products:?}");
    assert_eq!(find("softmax_rows").map(|t| t.dispatches), Some(1));
    assert_eq!(times.iter().map(|(_, t)| t.dispatches).sum::<u64>(), 3);
}
