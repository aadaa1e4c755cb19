//! Helpers of the GPU parity tests: the device (or a skip), deterministic inputs, and the
//! CPU-against-GPU comparison.

use rumus::nn::{CrossEntropyOptions, Linear, Module, cross_entropy};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::{Device, DynTensor, no_grad};

/// Tests that use process-wide state (the transfer counters, the global generator) run one
/// at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

pub use super::skip::skip;

/// Whether `gpu` runs `f16` products on cooperative matrices, which `what` needs; where it
/// does not, a skip note, or a failure under `RUMUS_REQUIRE_COOPMAT` (see [`skip`]).
pub fn has_coop_matmul(gpu: &rumus::backend::gpu::GpuDevice, what: &str) -> bool {
    let has = gpu.has_coop_matmul();
    if !has {
        let why = format!(
            "{} runs f16 products without cooperative matrices",
            gpu.name()
        );
        skip("RUMUS_REQUIRE_COOPMAT", what, why);
    }
    has
}

/// Whether `device` runs autocast's attention on matrix units (wgpu's cooperative matrices,
/// CUDA's tensor cores from compute capability 8.0), which `what` needs; where it does not,
/// a skip note, or a failure under `RUMUS_REQUIRE_COOPMAT` (see [`skip`]).
pub fn attention_on_matrix_units(device: &Device, what: &str) -> bool {
    match device {
        Device::Gpu(gpu) => has_coop_matmul(gpu, what),
        Device::Cuda(cuda) => {
            let has = cuda.compute_capability() >= (8, 0);
            if !has {
                let why = format!(
                    "{} has no mma.m16n8k16 (compute capability < 8.0)",
                    cuda.name()
                );
                skip("RUMUS_REQUIRE_COOPMAT", what, why);
            }
            has
        }
        Device::Cpu => false,
    }
}

/// The kernel entry points `f` dispatches on `device`'s GPU (wgpu's entry points, CUDA's
/// kernel names with their dtype suffixes), where the device can time kernels; elsewhere
/// `None`, after a skip note naming the test, or a failure under `RUMUS_REQUIRE_GPU_TIMING`
/// (see [`skip`]). Profiling counts every dispatch on the device, other tests' too: a test
/// that asserts what is absent from the list must hold `serial()`, and so must every test of
/// its file that could dispatch that kernel.
pub fn kernels_run(device: &Device, f: impl FnOnce()) -> Option<Vec<String>> {
    let profiled = match device {
        Device::Gpu(gpu) => gpu.profile_kernels(true),
        Device::Cuda(cuda) => cuda.profile_kernels(true),
        Device::Cpu => {
            skip(
                "RUMUS_REQUIRE_GPU",
                "which kernels ran",
                "it ran on the CPU",
            );
            return None;
        }
    };
    if let Err(e) = profiled {
        skip("RUMUS_REQUIRE_GPU_TIMING", "which kernels ran", e);
        return None;
    }
    f();
    let names = match device {
        Device::Gpu(gpu) => {
            let times = gpu.kernel_times().unwrap();
            gpu.profile_kernels(false).unwrap();
            times
                .into_iter()
                .map(|(entry, _)| entry.to_string())
                .collect()
        }
        Device::Cuda(cuda) => {
            let times = cuda.kernel_times().unwrap();
            cuda.profile_kernels(false).unwrap();
            times.into_iter().map(|(name, _)| name).collect()
        }
        Device::Cpu => unreachable!("returned above"),
    };
    Some(names)
}

/// Whether `device` is lavapipe, which ends every kernel invocation's loops after 65,535
/// iterations in all: ops whose loops would run longer split their work there (attention,
/// products) or are errors (pooling windows, reductions, int8 rows).
pub fn ends_long_loops(device: &Device) -> bool {
    matches!(device, Device::Gpu(gpu) if gpu.name().contains("llvmpipe"))
}

/// The GPU the GPU tests run on: wgpu's default adapter, or, with `RUMUS_TEST_DEVICE=cuda`,
/// the first CUDA device (the same parity tests against the CUDA backend).
pub fn gpu() -> Option<Device> {
    let opened = match std::env::var("RUMUS_TEST_DEVICE").as_deref() {
        Ok("cuda") => Device::cuda(),
        _ => Device::gpu(),
    };
    match opened {
        Ok(device) => Some(device),
        Err(e) => {
            skip("RUMUS_REQUIRE_GPU", "the GPU", e);
            None
        }
    }
}

/// [`gpu`] for tests of kernels only the wgpu backend has so far (WGSL custom kernels, int8
/// products, the fused attention, its 32-bit word kernels): under `RUMUS_TEST_DEVICE=cuda`,
/// a skip note naming `what`.
pub fn wgpu_only(what: &str) -> Option<Device> {
    let device = gpu()?;
    if device.is_cuda() {
        skip(
            "RUMUS_REQUIRE_WGPU",
            what,
            "the CUDA backend has no such kernel yet",
        );
        return None;
    }
    Some(device)
}

/// [`gpu`] with the GPU's own handle, for tests of what only a `GpuDevice` offers (its
/// memory, profiling, limits).
pub fn gpu_and_handle() -> Option<(Device, rumus::backend::gpu::GpuDevice)> {
    let device = gpu()?;
    let Device::Gpu(handle) = &device else {
        skip(
            "RUMUS_REQUIRE_WGPU",
            "what only a wgpu device offers",
            format!("the tests run on {device}"),
        );
        return None;
    };
    let handle = handle.clone();
    Some((device, handle))
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

/// A 12-32-3 ReLU classifier with Adam on fixed data, built on a device from the global
/// generator (seed it first): the training loop of the GPU tests.
pub struct TinyMlp {
    l1: Linear<12, 32>,
    l2: Linear<32, 3>,
    adam: Adam,
    x: DynTensor,
    labels: DynTensor,
}

impl TinyMlp {
    pub fn new(device: &Device) -> Self {
        let (l1, l2) = {
            let _on = device.set_default();
            (Linear::new().unwrap(), Linear::new().unwrap())
        };
        let mut params = l1.parameters();
        params.extend(l2.parameters());
        TinyMlp {
            l1,
            l2,
            adam: Adam::new(params, AdamConfig::default()).unwrap(),
            x: tensor(&[16, 12], 50).to(device).unwrap(),
            labels: DynTensor::from_vec((0..16).map(|i| i % 3).collect::<Vec<i64>>(), &[16])
                .unwrap(),
        }
    }

    /// One step (forward, cross-entropy, backward, Adam); the loss.
    pub fn step(&mut self) -> DynTensor {
        let h = self.l1.forward_dyn(&self.x).unwrap().relu().unwrap();
        let logits = self.l2.forward_dyn(&h).unwrap();
        let loss = cross_entropy(&logits, &self.labels, &CrossEntropyOptions::default()).unwrap();
        let mut grads = loss.backward().unwrap();
        let _no_grad = no_grad();
        self.adam.step(&mut grads).unwrap();
        loss
    }

    pub fn parameters(&self) -> Vec<DynTensor> {
        let mut params = self.l1.parameters();
        params.extend(self.l2.parameters());
        params
    }
}
