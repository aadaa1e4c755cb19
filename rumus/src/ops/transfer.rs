//! Moving tensors between devices. The copy is an op on the graph: the gradient of a tensor
//! moved to a GPU flows back to the host tensor it came from.

use super::BackwardOp;
use crate::autograd::record;
use crate::device::Device;
use crate::error::Result;
use crate::tensor::DynTensor;

impl DynTensor {
    /// This tensor on `device`: itself when it is already there, a copy otherwise.
    pub fn to(&self, device: &Device) -> Result<DynTensor> {
        let here = self.device();
        if here == *device {
            return Ok(self.clone());
        }
        let out = match device {
            Device::Cpu => DynTensor::from_buffer(self.host_copy()?, self.dims()),
            Device::Gpu(gpu) => {
                let host = match here {
                    Device::Cpu => self.to_contiguous_buffer()?,
                    Device::Gpu(_) => self.host_copy()?,
                };
                crate::backend::gpu::upload_asked(gpu, &host, self.dims())?
            }
        };
        Ok(record(out, &[self], || BackwardOp::ToDevice { from: here }))
    }
}
