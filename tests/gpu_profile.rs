//! Kernel profiling and tracing on the GPU (lavapipe in CI). In a test binary of its own,
//! its tests one at a time: profiling counts every dispatch on the device, so no other test
//! may run kernels meanwhile.

mod common;

use common::gpu::{gpu, tensor};

/// Kernel profiling counts each dispatch under its entry point and times it on the GPU.
#[test]
fn kernel_profile_counts_each_dispatch() {
    let _serial = common::gpu::serial();
    let Some((device, gpu_device)) = common::gpu::gpu_and_handle() else {
        return;
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
    // Column sums and casts to f16 are timed by shape: [40, 20] summed over its 40 rows in
    // one chunk, and 800 elements.
    let _columns = product.sum(&[0], false).unwrap();
    let _half = product.to_dtype(rumus::DType::F16).unwrap();
    let times = gpu_device.kernel_times().unwrap();
    gpu_device.profile_kernels(false).unwrap();
    let find = |entry: &str| times.iter().find(|(e, _)| *e == entry).map(|(_, t)| *t);
    let products = find("matmul_tiled").expect("the products were profiled");
    assert_eq!(products.dispatches, 2);
    assert!(products.seconds > 0.0, "{products:?}");
    assert_eq!(find("softmax_rows").map(|t| t.dispatches), Some(1));
    assert_eq!(find("sum_columns 40x20 /40").map(|t| t.dispatches), Some(1));
    assert_eq!(find("to_half 800").map(|t| t.dispatches), Some(1));
    assert_eq!(times.iter().map(|(_, t)| t.dispatches).sum::<u64>(), 5);
}

/// A product on cooperative matrices is timed under its sizes and operand layouts (a step's
/// products differ by shape far more than by kernel); other products under their entry
/// point.
#[test]
fn products_on_the_matrix_units_are_profiled_by_shape() {
    let _serial = common::gpu::serial();
    let Some((device, gpu_device)) = common::gpu::gpu_and_handle() else {
        return;
    };
    let half = |dims: &[usize], seed| {
        tensor(dims, seed)
            .to_dtype(rumus::DType::F16)
            .unwrap()
            .to(&device)
            .unwrap()
    };
    let (a, b) = (half(&[64, 48], 92), half(&[32, 48], 93));
    gpu_device.profile_kernels(true).unwrap();
    let _product = a.matmul(&b.transpose(0, 1).unwrap()).unwrap();
    let times = gpu_device.kernel_times().unwrap();
    gpu_device.profile_kernels(false).unwrap();
    let names: Vec<&str> = times.iter().map(|(name, _)| *name).collect();
    if gpu_device.has_tensor_matmul() {
        assert_eq!(names, ["matmul_tensor 64x32x48 A@Bt x1 /1"]);
    } else if gpu_device.has_coop_matmul() {
        assert_eq!(names, ["matmul_coop 64x32x48 A@Bt x1 /1"]);
    } else {
        assert!(names.contains(&"matmul_tiled"), "{names:?}");
        // (the tiled kernels' f16 result is cast by `to_half`, timed by its size)
        let mut products = names.iter().filter(|n| n.starts_with("matmul"));
        assert!(products.all(|n| !n.contains(' ')), "{names:?}");
    }
}

/// `RUMUS_GPU_TRACE` prints each kernel as it submits it alone and waits for it, and each
/// pipeline it builds, and the results stay right: this binary's ignored `traced_product`, run again with it set.
#[test]
fn tracing_prints_every_kernel_and_waits_for_it() {
    let _serial = common::gpu::serial();
    if gpu().is_none() {
        return;
    }
    let this_binary = std::env::current_exe().unwrap();
    let run = std::process::Command::new(this_binary)
        .args(["--ignored", "--exact", "traced_product", "--nocapture"])
        .env("RUMUS_GPU_TRACE", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let traced: Vec<&str> = stderr
        .lines()
        .filter(|line| line.starts_with("rumus gpu trace: "))
        .collect();
    // The product (tiled, or on the matrix units) with its grid, and before it the build
    // of its pipeline (new in this process) with how long that took.
    let dispatched = traced
        .iter()
        .position(|line| line.contains("matmul") && line.contains("groups ["));
    let built = traced.iter().position(|line| {
        line.starts_with("rumus gpu trace: built matmul") && line.contains(" in ")
    });
    assert!(
        matches!((built, dispatched), (Some(b), Some(d)) if b < d),
        "{stderr}"
    );
    assert!(!stderr.contains("did not finish"), "{stderr}");
}

#[test]
#[ignore = "run by tracing_prints_every_kernel_and_waits_for_it, with RUMUS_GPU_TRACE set"]
fn traced_product() {
    let Some(device) = gpu() else { return };
    let (a, b) = (tensor(&[40, 30], 94), tensor(&[30, 20], 95));
    let on_gpu = a
        .to(&device)
        .unwrap()
        .matmul(&b.to(&device).unwrap())
        .unwrap();
    common::gpu::assert_close("traced product", &a.matmul(&b).unwrap(), &on_gpu);
}
