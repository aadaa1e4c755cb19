//! Where a tensor's elements live: host memory (`Device::Cpu`), a GPU reached through wgpu
//! (`Device::Gpu`), or an NVIDIA GPU reached through CUDA (`Device::Cuda`).
//!
//! Ops run on the device of their operands. Operands on different devices are an error, never a
//! silent copy; the one exception is a rank-0 host tensor (a scalar constant such as the `0`
//! in ReLU's gradient), which joins a GPU op as a constant, as in PyTorch.

use std::cell::RefCell;
use std::fmt;

use crate::backend::cuda::CudaDevice;
use crate::backend::gpu::GpuDevice;
use crate::error::Result;

/// A place for tensors and the kernels that run on them.
#[derive(Clone, Debug, PartialEq)]
pub enum Device {
    /// Host memory, rayon kernels.
    Cpu,
    /// A GPU adapter, WGSL kernels.
    Gpu(GpuDevice),
    /// An NVIDIA GPU, CUDA kernels and cuBLASLt products.
    Cuda(CudaDevice),
}

impl Device {
    /// The default GPU (a high-performance adapter), opened once per process. Fails when rumus
    /// was built without its `gpu` feature or no adapter exists.
    pub fn gpu() -> Result<Device> {
        Ok(Device::Gpu(GpuDevice::default_adapter()?))
    }

    /// The first CUDA device (ordinal 0), opened once per process. Fails when rumus was
    /// built without its `cuda` feature, or the NVIDIA driver or the CUDA libraries are
    /// missing (the error says which), or there is no NVIDIA GPU.
    pub fn cuda() -> Result<Device> {
        Self::cuda_ordinal(0)
    }

    /// CUDA device `ordinal` (0 is the first), as [`Device::cuda`] opens it.
    pub fn cuda_ordinal(ordinal: usize) -> Result<Device> {
        Ok(Device::Cuda(CudaDevice::open(ordinal)?))
    }

    /// The device a name picks, as command lines and configuration files spell it: `cpu`,
    /// `gpu` (wgpu's default adapter), `cuda` or `cuda:N` (CUDA device N), opened as
    /// [`Device::gpu`] and [`Device::cuda_ordinal`] open them.
    ///
    /// ```
    /// # fn main() -> rumus::Result<()> {
    /// assert_eq!(rumus::Device::named("cpu")?, rumus::Device::Cpu);
    /// assert!(rumus::Device::named("tpu").is_err());
    /// # Ok(()) }
    /// ```
    pub fn named(name: &str) -> Result<Device> {
        match name {
            "cpu" => Ok(Device::Cpu),
            "gpu" => Device::gpu(),
            "cuda" => Device::cuda(),
            _ => match name.strip_prefix("cuda:").map(str::parse) {
                Some(Ok(ordinal)) => Device::cuda_ordinal(ordinal),
                _ => Err(crate::error::DeviceError::UnknownDevice { name: name.into() }.into()),
            },
        }
    }

    /// Whether this is a GPU, through wgpu or CUDA.
    pub fn is_gpu(&self) -> bool {
        matches!(self, Device::Gpu(_) | Device::Cuda(_))
    }

    /// Whether this is a CUDA device.
    pub fn is_cuda(&self) -> bool {
        matches!(self, Device::Cuda(_))
    }

    /// Waits until every kernel queued on this device has finished (timing, benchmarks).
    /// Reading data back waits by itself; training code never needs this.
    pub fn synchronize(&self) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Gpu(gpu) => gpu.synchronize(),
            Device::Cuda(cuda) => cuda.synchronize(),
        }
    }
}

thread_local! {
    static DEFAULT_DEVICE: RefCell<Device> = const { RefCell::new(Device::Cpu) };
}

/// The device new filled and random tensors are made on, on this thread (the CPU unless a
/// [`Device::set_default`] guard is alive). Tensors from data (`from_vec`) start on the CPU.
pub fn default_device() -> Device {
    DEFAULT_DEVICE.with(|d| d.borrow().clone())
}

/// Restores the previous default device when dropped.
#[must_use = "the default device reverts when the guard drops"]
pub struct DefaultDeviceGuard {
    previous: Device,
}

impl Drop for DefaultDeviceGuard {
    fn drop(&mut self) {
        let previous = std::mem::replace(&mut self.previous, Device::Cpu);
        DEFAULT_DEVICE.with(|d| *d.borrow_mut() = previous);
    }
}

impl Device {
    /// Makes this the thread's default device until the guard drops, so layers and models
    /// built meanwhile have their parameters here (PyTorch's `with torch.device(...)`):
    ///
    /// ```no_run
    /// # fn main() -> rumus::Result<()> {
    /// let gpu = rumus::Device::gpu()?;
    /// let layer = {
    ///     let _on_gpu = gpu.set_default();
    ///     rumus::nn::Linear::<784, 10>::new()?
    /// };
    /// # Ok(()) }
    /// ```
    pub fn set_default(&self) -> DefaultDeviceGuard {
        let previous = DEFAULT_DEVICE.with(|d| d.replace(self.clone()));
        DefaultDeviceGuard { previous }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Gpu(gpu) => write!(f, "gpu ({})", gpu.name()),
            Device::Cuda(cuda) => write!(f, "cuda:{} ({})", cuda.ordinal(), cuda.name()),
        }
    }
}
