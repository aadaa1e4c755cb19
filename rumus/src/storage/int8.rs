//! Int8 products of quantized layers as storage runs them, over weights kept resident on
//! the backend of the layer's device.

use std::sync::Arc;

use super::Storage;
use super::dispatch::{Operand, run};
use crate::backend::cpu::Cpu;
use crate::backend::cuda::{CudaBuffer, CudaDevice};
use crate::backend::gpu::GpuDevice;
use crate::backend::kinds::Int8Matrix;
use crate::backend::{Backend, Int8};
use crate::device::Device;
use crate::error::Result;

/// A quantized layer's weights where a backend keeps them: nowhere beyond the layer itself
/// for the host, uploaded for a GPU.
#[derive(Debug, Clone, Default)]
pub(crate) enum Int8Resident {
    /// On the host only (the layer's own packed weights).
    #[default]
    Host,
    /// Uploaded to a GPU.
    Gpu(Arc<<GpuDevice as Int8>::Int8Weights>),
}

impl Storage {
    /// `matrix` uploaded to `device`'s backend.
    pub(crate) fn upload_int8(device: &Device, matrix: &Int8Matrix<'_>) -> Result<Int8Resident> {
        match device {
            Device::Cpu => Cpu.upload_int8(matrix).map(|()| Int8Resident::Host),
            Device::Gpu(gpu) => Ok(Int8Resident::Gpu(Arc::new(gpu.upload_int8(matrix)?))),
            Device::Cuda(cuda) => match cuda.upload_int8(matrix)? {},
        }
    }

    /// `x` `[m, cols]` through the resident weights, `[m, rows]`; `None` when they are not
    /// on a device that runs it (the host runs the layer's own kernel).
    pub(crate) fn int8_linear(
        x: Operand<'_>,
        resident: &Int8Resident,
        m: usize,
    ) -> Result<Option<triomphe::Arc<Storage>>> {
        let Int8Resident::Gpu(weights) = resident else {
            return Ok(None);
        };
        run(
            "QuantizedLinear::forward",
            [x],
            |be: &Cpu, [x]| be.int8_linear(x, &(), m).map(Some),
            |be: &GpuDevice, [x]| be.int8_linear(x, weights, m).map(Some),
            |be: &CudaDevice, [_]| {
                Err::<Option<CudaBuffer>, _>(Backend::unsupported(be, "QuantizedLinear::forward"))
            },
        )
    }
}
