//! Dtype conversion. Between `f32` and `f64` gradients flow back (converted back); casts to
//! integers or `bool` end the graph; a cast to `f16` (which carries no gradients) of a
//! tracked tensor is an error rather than a silent cut.

use super::BackwardOp;
use super::hooks::{OpCall, apply};
use crate::dtype::DType;
use crate::error::{AutogradError, Result};
use crate::storage::Storage;
use crate::tensor::DynTensor;

impl DynTensor {
    /// The values converted to `dtype` (float to integer truncates toward zero).
    pub fn to_dtype(&self, dtype: DType) -> Result<DynTensor> {
        apply(OpCall::Cast, &[self], |tape| {
            if dtype == self.dtype() {
                return Ok(self.clone());
            }
            let half = matches!(dtype, DType::F16 | DType::BF16);
            if half && self.requires_grad() && crate::autograd::is_grad_enabled() {
                return Err(AutogradError::NotDifferentiable {
                    context: format!("to_dtype(DType::{dtype:?}) of a tensor that requires grad"),
                    dtype,
                }
                .into());
            }
            let out = self.cast_untracked(dtype)?;
            if !dtype.is_float() {
                return Ok(out);
            }
            let from = self.dtype();
            Ok(tape.node(out, || BackwardOp::Cast { from }))
        })
    }

    fn cast_untracked(&self, dtype: DType) -> Result<DynTensor> {
        let out = Storage::cast(self.operand(), dtype)?;
        Ok(DynTensor::computed(out, self.dims()))
    }
}
