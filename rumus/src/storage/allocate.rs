//! Memory made on a device: the backend is the device's, not an operand's.

use super::Storage;
use crate::backend::Allocate;
use crate::backend::cpu::Cpu;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;

impl Storage {
    /// `dims` elements of `dtype`, each `value`, on `device`.
    pub(crate) fn full(
        device: &Device,
        dims: &[usize],
        value: f64,
        dtype: DType,
    ) -> Result<Storage> {
        Ok(match device {
            Device::Cpu => Storage::new(Cpu.full(dims, value, dtype)?),
            Device::Gpu(gpu) => Storage::on_gpu(gpu.full(dims, value, dtype)?),
        })
    }
}
