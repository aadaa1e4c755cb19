//! Where a tensor's elements live: host memory (`Device::Cpu`) or a GPU reached through wgpu.
//!
//! Ops run on the device of their operands. Operands on different devices are an error, never a
//! silent copy; the one exception is a rank-0 host tensor (a scalar constant such as the `0`
//! in ReLU's gradient), which joins a GPU op as a constant, as in PyTorch.

use std::fmt;

use crate::backend::gpu::GpuDevice;
use crate::error::{DeviceError, Result};
use crate::tensor::DynTensor;

/// A place for tensors and the kernels that run on them.
#[derive(Clone, Debug, PartialEq)]
pub enum Device {
    /// Host memory, rayon kernels.
    Cpu,
    /// A GPU adapter, WGSL kernels.
    Gpu(GpuDevice),
}

impl Device {
    /// The default GPU (a high-performance adapter), opened once per process. Fails when rumus
    /// was built without its `gpu` feature or no adapter exists.
    pub fn gpu() -> Result<Device> {
        Ok(Device::Gpu(GpuDevice::default_adapter()?))
    }

    pub fn is_gpu(&self) -> bool {
        matches!(self, Device::Gpu(_))
    }

    /// Waits until every kernel queued on this device has finished (timing, benchmarks).
    /// Reading data back waits by itself; training code never needs this.
    pub fn synchronize(&self) -> Result<()> {
        match self {
            Device::Cpu => Ok(()),
            Device::Gpu(gpu) => gpu.synchronize(),
        }
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Gpu(gpu) => write!(f, "gpu ({})", gpu.name()),
        }
    }
}

/// The GPU an op runs on, or `None` for the CPU. Every operand must be on the same device,
/// except rank-0 host tensors, which join a GPU op as constants.
#[cfg(feature = "gpu")]
pub(crate) fn gpu_of(op: &'static str, operands: &[&DynTensor]) -> Result<Option<GpuDevice>> {
    let mut gpu: Option<GpuDevice> = None;
    for operand in operands {
        if let Device::Gpu(device) = operand.device() {
            match &gpu {
                Some(seen) if *seen != device => {
                    return Err(DeviceError::Mismatch {
                        op,
                        lhs: Device::Gpu(seen.clone()).to_string(),
                        rhs: Device::Gpu(device).to_string(),
                    }
                    .into());
                }
                _ => gpu = Some(device),
            }
        }
    }
    if let Some(device) = &gpu
        && let Some(host) = operands
            .iter()
            .find(|t| !t.device().is_gpu() && t.rank() != 0)
    {
        return Err(DeviceError::Mismatch {
            op,
            lhs: Device::Gpu(device.clone()).to_string(),
            rhs: format!("cpu, shape {:?}", host.dims()),
        }
        .into());
    }
    Ok(gpu)
}
