//! Helpers of the GPU parity tests: the device (or a skip), deterministic inputs, and the
//! CPU-against-GPU comparison.

use rumus::{Device, DynTensor};

/// Tests that use process-wide state (the transfer counters, the global generator) run one
/// at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn gpu() -> Option<Device> {
    match Device::gpu() {
        Ok(device) => Some(device),
        Err(e) if std::env::var_os("RUMUS_REQUIRE_GPU").is_some() => {
            panic!("RUMUS_REQUIRE_GPU is set but no GPU is usable: {e}")
        }
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

/// Deterministic values in [-2, 2) without the global generator (tests run in parallel).
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

pub fn tensor(dims: &[usize], seed: u64) -> DynTensor {
    DynTensor::from_vec(values(dims.iter().product(), seed), dims).unwrap()
}

/// `|gpu - cpu| <= 1e-5 + 1e-4 |cpu|` element by element (f32 kernels summing in another
/// order), NaN matching NaN.
pub fn assert_close(what: &str, cpu: &DynTensor, gpu: &DynTensor) {
    assert_eq!(cpu.dims(), gpu.dims(), "{what}: shapes differ");
    assert_eq!(cpu.dtype(), gpu.dtype(), "{what}: dtypes differ");
    assert!(gpu.device().is_gpu(), "{what}: the result left the GPU");
    let (c, g) = (cpu.to_f64_vec(), gpu.to_f64_vec());
    for (i, (x, y)) in c.iter().zip(&g).enumerate() {
        let ok = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= 1e-5 + 1e-4 * x.abs();
        assert!(ok, "{what}: element {i}: cpu {x}, gpu {y}");
    }
}

/// Runs `f` on CPU tensors and on their GPU copies and compares the results.
pub fn check(
    what: &str,
    device: &Device,
    inputs: &[DynTensor],
    f: impl Fn(&[DynTensor]) -> DynTensor,
) {
    let on_gpu: Vec<DynTensor> = inputs.iter().map(|t| t.to(device).unwrap()).collect();
    assert_close(what, &f(inputs), &f(&on_gpu));
}
