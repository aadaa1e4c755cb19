//! Dtype conversion. Between `f32` and `f64` gradients flow back (converted back); casts to
//! integers or `bool` end the graph; a cast to `f16` (which carries no gradients) of a
//! tracked tensor is an error rather than a silent cut.

use super::BackwardOp;
use crate::autograd::record;
use crate::backend::cpu::strided::map;
use crate::dtype::DType;
use crate::element::Element;
use crate::error::{AutogradError, Result};
use crate::shape::Layout;
use crate::storage::CpuBuffer;
use crate::tensor::DynTensor;

fn convert<S: Element + Default, T: Element + Default>(data: &[S], layout: &Layout) -> Vec<T> {
    map(data, layout, |x: S| T::from_f64(x.to_f64()))
}

fn convert_to<S: Element + Default>(data: &[S], layout: &Layout, dtype: DType) -> CpuBuffer {
    match dtype {
        DType::F32 => CpuBuffer::F32(convert(data, layout)),
        DType::F64 => CpuBuffer::F64(convert(data, layout)),
        DType::F16 => CpuBuffer::F16(convert(data, layout)),
        DType::I64 => CpuBuffer::I64(convert(data, layout)),
        DType::Bool => CpuBuffer::Bool(convert(data, layout)),
    }
}

impl DynTensor {
    /// The values converted to `dtype` (float to integer truncates toward zero).
    pub fn to_dtype(&self, dtype: DType) -> Result<DynTensor> {
        crate::onnx::op(
            || self.to_dtype_untraced(dtype),
            |e, out| crate::onnx::onnx_cast(e, self, out),
        )
    }

    fn to_dtype_untraced(&self, dtype: DType) -> Result<DynTensor> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        if dtype == DType::F16 && self.requires_grad() && crate::autograd::is_grad_enabled() {
            return Err(AutogradError::NotDifferentiable {
                context: "to_dtype(DType::F16) of a tensor that requires grad".into(),
                dtype,
            }
            .into());
        }
        let out = self.cast_untracked(dtype)?;
        if !dtype.is_float() {
            return Ok(out);
        }
        let from = self.dtype();
        Ok(record(out, &[self], || BackwardOp::Cast { from }))
    }

    fn cast_untracked(&self, dtype: DType) -> Result<DynTensor> {
        #[cfg(feature = "gpu")]
        if let Some(gpu) = crate::device::gpu_of("to_dtype", &[self])? {
            return gpu.cast(self, dtype);
        }
        crate::alloc::ensure_output("to_dtype", self.dims(), dtype.size_in_bytes())?;
        let buffer = self.with_buffer(|buffer, layout| match buffer {
            CpuBuffer::F32(v) => convert_to(v, layout, dtype),
            CpuBuffer::F64(v) => convert_to(v, layout, dtype),
            CpuBuffer::F16(v) => convert_to(v, layout, dtype),
            CpuBuffer::I64(v) => convert_to(v, layout, dtype),
            CpuBuffer::Bool(v) => convert_to(v, layout, dtype),
        })?;
        Ok(DynTensor::from_buffer(buffer, self.dims()))
    }
}
