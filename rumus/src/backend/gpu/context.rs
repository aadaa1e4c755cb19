//! Opening a GPU: one wgpu instance, adapter, device and queue per process, shared by every
//! tensor on it through [`GpuDevice`], a cheap handle.

use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use super::batch::Batch;
use super::memory::{BufferPool, MemoryStats};
use super::pipelines::PipelineCache;
use super::fault::Faults;
use super::wait::WaitState;
use crate::error::{DeviceError, Result};

/// Everything one opened GPU owns.
pub(crate) struct Context {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub limits: wgpu::Limits,
    /// Whether `f16` products run on cooperative matrices (`matmul_coop.wgsl`).
    pub coop_matmul: bool,
    /// Whether the device has `VK_NV_cooperative_matrix2` enabled, so that `f16` products
    /// run on `matmul_tensor.comp` instead (see `coopmat2.rs`).
    pub tensor_matmul: bool,
    pub pipelines: PipelineCache,
    pub pool: Mutex<BufferPool>,
    pub batch: Mutex<Batch>,
    /// The limit on host waits, and what tells a stuck queue from a slow one (`wait.rs`).
    pub wait: WaitState,
    /// The first fault the device reported after the call that caused it (`fault.rs`).
    pub faults: Arc<Faults>,
    /// See [`GpuDevice::loop_budget`].
    pub loop_budget: Option<usize>,
    /// Host scalars (rank-0 tensors) that joined GPU ops, uploaded once each.
    pub constants: Mutex<std::collections::HashMap<(crate::DType, u32), Arc<super::GpuBuffer>>>,
}

/// A handle to an opened GPU. Clones are the same device; tensors on it compare equal devices.
#[derive(Clone)]
pub struct GpuDevice(pub(crate) Arc<Context>);

impl PartialEq for GpuDevice {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "GpuDevice({:?}, {:?})",
            self.0.info.name, self.0.info.backend
        )
    }
}

static DEFAULT: OnceLock<std::result::Result<GpuDevice, DeviceError>> = OnceLock::new();

impl GpuDevice {
    /// The process-wide default GPU, opened on first use.
    pub fn default_adapter() -> Result<GpuDevice> {
        DEFAULT
            .get_or_init(open)
            .clone()
            .map_err(crate::Error::from)
    }

    /// The adapter's name ("NVIDIA H200", "llvmpipe (LLVM 15.0.6, 256 bits)").
    pub fn name(&self) -> &str {
        &self.0.info.name
    }

    /// Whether this adapter is a CPU implementation (lavapipe, WARP, SwiftShader).
    pub fn is_software(&self) -> bool {
        self.0.info.device_type == wgpu::DeviceType::Cpu
    }

    /// Loop iterations one kernel invocation may run, all its loops together, before the
    /// device silently ends them: lavapipe (Mesa's CPU device) stops them after 65,535.
    /// Kernels whose loops grow with the input split their work into passes under it
    /// (`attention.rs`, `matmul.rs`) or refuse it. `None`: no such limit.
    pub(crate) fn loop_budget(&self) -> Option<usize> {
        self.0.loop_budget
    }

    /// An error when one invocation of `op`'s kernel would run more loop iterations than
    /// [`GpuDevice::loop_budget`] allows: a wrong result would follow, silently.
    pub(crate) fn check_loop_budget(&self, op: &'static str, iterations: usize) -> Result<()> {
        match self.loop_budget() {
            Some(budget) if iterations > budget => Err(DeviceError::LoopBudget {
                op,
                iterations,
                budget,
                device: self.name().to_string(),
            }
            .into()),
            _ => Ok(()),
        }
    }

    /// The graphics API under wgpu ("vulkan", "metal", "dx12").
    pub fn backend(&self) -> String {
        self.0.info.backend.to_string()
    }

    /// Bytes held in tensors, kept for reuse, and the most ever held at once.
    pub fn memory(&self) -> MemoryStats {
        self.0
            .pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .stats()
    }

    /// Frees the buffers the pool keeps for reuse.
    pub fn release_pooled(&self) {
        self.0
            .pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .release();
    }

    /// Restarts [`MemoryStats::peak`] and [`MemoryStats::in_use_peak`] from what is held now,
    /// to measure one workload's peaks.
    pub fn reset_memory_peak(&self) {
        self.0
            .pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .reset_peak();
    }

    /// Submits queued kernels and waits for them to finish: a [`DeviceError::Timeout`]
    /// when none of them finishes within [`GpuDevice::wait_timeout`].
    pub fn synchronize(&self) -> Result<()> {
        self.submit();
        self.wait_for_queue("queued kernels (synchronize)")
    }

    /// Whether `f16` matrix products run on the adapter's matrix units (cooperative matrices,
    /// 16x16x16 with `f16` inputs and `f32` accumulators, subgroups of 32). Elsewhere they run
    /// on the tiled kernels, reading `f16` and accumulating in `f32`. Setting the environment
    /// variable `RUMUS_GPU_NO_COOP` turns the matrix units off (to compare the two paths).
    pub fn has_coop_matmul(&self) -> bool {
        self.0.coop_matmul
    }

    /// Whether those products run on `VK_NV_cooperative_matrix2` (matrices a whole workgroup
    /// loads at once, staged by the driver), about 1.4x the rate of plain cooperative
    /// matrices on an H200. Needs a Vulkan adapter that offers the extension (recent NVIDIA
    /// drivers); on by default there, off when the environment variable
    /// `RUMUS_GPU_NO_COOPMAT2` is set as the device is opened (to compare the two paths).
    pub fn has_tensor_matmul(&self) -> bool {
        self.0.tensor_matmul
    }

    /// Largest tensor (in bytes) one kernel may bind: the adapter's limit, which rumus asks
    /// for in full (wgpu's default is 128 MiB).
    pub fn max_binding_bytes(&self) -> u64 {
        self.0
            .limits
            .max_storage_buffer_binding_size
            .min(self.0.limits.max_buffer_size)
    }
}

pub(crate) fn gpu_error(message: String) -> crate::Error {
    DeviceError::Gpu { message }.into()
}

fn open() -> std::result::Result<GpuDevice, DeviceError> {
    let no_adapter = |reason: String| DeviceError::NoAdapter { reason };
    let mut descriptor = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    if std::env::var_os("WGPU_BACKEND").is_none() {
        descriptor.backends = wgpu::Backends::PRIMARY;
    }
    let instance = wgpu::Instance::new(descriptor);
    let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        force_fallback_adapter: false,
        compatible_surface: None,
        ..Default::default()
    }))
    .map_err(|e| no_adapter(e.to_string()))?;
    let info = adapter.get_info();
    // Ask for everything the adapter allows: large tensors need large bindings.
    let limits = adapter.limits();
    let coop_matmul = offers_coop_matmul(&adapter);
    let (required_features, experimental_features) = if coop_matmul {
        // SAFETY: wgpu marks cooperative matrices experimental (its implementation may have
        // bugs that cause undefined behaviour). rumus uses them in one kernel,
        // `matmul_coop.wgsl`, which stages its operands in workgroup memory with bounds
        // checks and is tested against the f32 product on every adapter that offers it.
        (COOP_FEATURES, unsafe { wgpu::ExperimentalFeatures::enabled() })
    } else {
        (
            wgpu::Features::empty(),
            wgpu::ExperimentalFeatures::disabled(),
        )
    };
    // Timestamps for kernel profiling, where the adapter has them (unused until asked for).
    let profiling = adapter.features() & super::profile::PROFILE_FEATURES;
    let required_features = if profiling == super::profile::PROFILE_FEATURES {
        required_features | profiling
    } else {
        required_features
    };
    // The default where offered since the GPU suite passed with it on an H200 (coopmat2.rs).
    let with_tensor_matmul = if coop_matmul && std::env::var_os("RUMUS_GPU_NO_COOPMAT2").is_none()
    {
        // SAFETY: `experimental_features` is what the plain request below passes.
        unsafe { super::coopmat2::open(&adapter, required_features, &limits, experimental_features) }
    } else {
        None
    };
    let tensor_matmul = with_tensor_matmul.is_some();
    let (device, queue) = match with_tensor_matmul {
        Some(opened) => opened,
        None => pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("rumus"),
            required_features,
            required_limits: limits.clone(),
            experimental_features,
            ..Default::default()
        }))
        .map_err(|e| no_adapter(format!("{} refused a device: {e}", info.name)))?,
    };
    let batch = Batch::new(&device, &limits);
    let wait = WaitState::from_env()?;
    let faults = Faults::watch(&device);
    // Mesa's llvmpipe (lavapipe) counts every loop iteration of an invocation against one
    // limit (LP_MAX_TGSI_LOOP_ITERATIONS) and leaves the loops when it runs out.
    let loop_budget = info.name.contains("llvmpipe").then_some(65_535);
    Ok(GpuDevice(Arc::new(Context {
        wait,
        faults,
        loop_budget,
        pipelines: PipelineCache::default(),
        pool: Mutex::new(BufferPool::default()),
        batch: Mutex::new(batch),
        constants: Mutex::default(),
        coop_matmul,
        tensor_matmul,
        device,
        queue,
        info,
        limits,
    })))
}

/// What `matmul_coop.wgsl` needs: f16 in shaders, subgroup ids, cooperative matrices.
const COOP_FEATURES: wgpu::Features = wgpu::Features::SHADER_F16
    .union(wgpu::Features::SUBGROUP)
    .union(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX);

/// Workgroup memory of `matmul_coop.wgsl`: two stages of each operand (2 x 2 x 1280
/// quads of 8 bytes) and 1024 f32 of output scratch.
pub(crate) const COOP_MATMUL_WORKGROUP_BYTES: u32 = 2 * 2 * 1280 * 8 + 1024 * 4;
/// Workgroup memory of `attention_coop.wgsl`: two staged tiles (2304 f16 quads), the scores
/// (1088 f32 quads), the f16 operand (1152 quads), the per-query terms (32 f32 quads) and the
/// forward pass's four rescale votes.
pub(crate) const COOP_ATTENTION_WORKGROUP_BYTES: u32 =
    2304 * 8 + 1088 * 16 + 1152 * 8 + 32 * 16 + 4 * 4;
/// What the adapter must offer for the cooperative-matrix kernels, which run together.
pub(crate) const COOP_WORKGROUP_BYTES: u32 =
    if COOP_MATMUL_WORKGROUP_BYTES > COOP_ATTENTION_WORKGROUP_BYTES {
        COOP_MATMUL_WORKGROUP_BYTES
    } else {
        COOP_ATTENTION_WORKGROUP_BYTES
    };

/// Whether `adapter` can run `matmul_coop.wgsl`: the features, subgroups of exactly 32
/// (the kernel splits its 128 invocations into four), its workgroup memory, and a 16x16x16
/// configuration with f16 inputs and an f32 accumulator.
fn offers_coop_matmul(adapter: &wgpu::Adapter) -> bool {
    if std::env::var_os("RUMUS_GPU_NO_COOP").is_some() {
        return false;
    }
    let info = adapter.get_info();
    adapter.features().contains(COOP_FEATURES)
        && info.subgroup_min_size == 32
        && info.subgroup_max_size == 32
        && adapter.limits().max_compute_workgroup_storage_size >= COOP_WORKGROUP_BYTES
        && adapter.cooperative_matrix_properties().iter().any(|c| {
            (c.m_size, c.n_size, c.k_size) == (16, 16, 16)
                && c.ab_type == wgpu::CooperativeScalarType::F16
                && c.cr_type == wgpu::CooperativeScalarType::F32
        })
}
