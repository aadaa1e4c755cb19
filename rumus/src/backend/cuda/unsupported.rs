//! Kernel families the CUDA backend has no kernels for yet: every op of them is the
//! contract's [`DeviceError::Unsupported`](crate::error::DeviceError::Unsupported), naming
//! the op and "cuda".

use super::context::CudaDevice;
use crate::backend::{Backend, Custom, Int8};

impl Custom for CudaDevice {}

impl Int8 for CudaDevice {
    type Int8Weights = std::convert::Infallible;

    fn upload_int8(
        &self,
        _: &crate::backend::kinds::Int8Matrix<'_>,
    ) -> crate::Result<std::convert::Infallible> {
        Err(self.unsupported("QuantizedLinear"))
    }
}

impl Backend for CudaDevice {
    type Memory = super::memory::CudaBuffer;

    fn name(&self) -> &'static str {
        "cuda"
    }
}
