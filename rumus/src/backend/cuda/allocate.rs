//! Filled memory on CUDA: one `fill` kernel per element width, given the value's bits.

use super::context::CudaDevice;
use super::launch::width_suffix;
use super::memory::CudaBuffer;
use crate::backend::Allocate;
use crate::dtype::DType;
use crate::error::Result;

impl Allocate for CudaDevice {
    fn full(&self, dims: &[usize], value: f64, dtype: DType) -> Result<CudaBuffer> {
        let n: usize = dims.iter().product();
        let out = CudaBuffer::uninit(self, n, dtype)?;
        let kernel = self.kernel("elementwise", "fill", [width_suffix(dtype), ""])?;
        let (o, n64) = (out.address(0), n as i64);
        match dtype {
            DType::F32 => self.launch_elements(kernel, n, &[&o, &(value as f32).to_bits(), &n64]),
            DType::F64 => self.launch_elements(kernel, n, &[&o, &value.to_bits(), &n64]),
            DType::F16 => {
                let bits = crate::element::f16_from_f64(value).to_bits();
                self.launch_elements(kernel, n, &[&o, &bits, &n64])
            }
            DType::BF16 => {
                let bits = crate::element::bf16_from_f64(value).to_bits();
                self.launch_elements(kernel, n, &[&o, &bits, &n64])
            }
            DType::I64 => self.launch_elements(kernel, n, &[&o, &(value as i64), &n64]),
            DType::Bool => self.launch_elements(kernel, n, &[&o, &u8::from(value != 0.0), &n64]),
        }?;
        Ok(out)
    }
}
