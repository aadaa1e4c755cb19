//! Moving tensors between devices. The copy is an op on the graph: the gradient of a tensor
//! moved to a GPU flows back to the host tensor it came from.

use super::BackwardOp;
use crate::autograd::record;
use crate::device::Device;
use crate::error::Result;
use crate::storage::Storage;
use crate::tensor::DynTensor;

impl DynTensor {
    /// This tensor on `device`: itself when it is already there, a copy otherwise.
    pub fn to(&self, device: &Device) -> Result<DynTensor> {
        let here = self.device();
        if here == *device {
            return Ok(self.clone());
        }
        // A broadcast view holds few values; its copy holds every element.
        crate::alloc::ensure_output("to", self.dims(), self.dtype().size_in_bytes())?;
        let host = self.host_copy()?;
        let out = DynTensor::computed(Storage::from_host(device, host)?, self.dims());
        Ok(record(out, &[self], || BackwardOp::ToDevice { from: here }))
    }
}
