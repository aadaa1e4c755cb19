//! Memory made on a device, or moved there: the backend is the device's, not an operand's.

use super::{CpuBuffer, Storage};
use crate::backend::Allocate;
use crate::backend::cpu::Cpu;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;

use triomphe::Arc;

impl Storage {
    /// `host` elements on `device`: kept as they are for the host, uploaded (an asked-for
    /// transfer) for a GPU.
    pub(crate) fn from_host(device: &Device, host: CpuBuffer) -> Result<Arc<Storage>> {
        Ok(match device {
            Device::Cpu => Storage::new(host),
            Device::Gpu(gpu) => Storage::uploaded(
                Storage::on_gpu(crate::backend::gpu::upload_buffer(gpu, &host)?),
                &host,
            ),
            Device::Cuda(cuda) => Storage::uploaded(
                Storage::on_cuda(crate::backend::cuda::upload(cuda, &host)?),
                &host,
            ),
        })
    }

    /// `dims` elements of `dtype`, each `value`, on `device`.
    pub(crate) fn full(
        device: &Device,
        dims: &[usize],
        value: f64,
        dtype: DType,
    ) -> Result<Arc<Storage>> {
        Ok(match device {
            Device::Cpu => Storage::new(Cpu.full(dims, value, dtype)?),
            Device::Gpu(gpu) => Storage::on_gpu(gpu.full(dims, value, dtype)?),
            Device::Cuda(cuda) => Storage::on_cuda(cuda.full(dims, value, dtype)?),
        })
    }
}
