//! In-place updates, for optimizers and buffers (running statistics). Each write bumps the
//! storage version, so a graph that saved the old values refuses to back-propagate instead of
//! silently using the new ones. While recording, tensors that require a gradient may not be
//! updated in place (wrap the update in `no_grad`).

use crate::autograd::is_grad_enabled;
use crate::error::{AutogradError, Error, Result, ShapeError};
use crate::storage::Storage;
use crate::tensor::DynTensor;

/// What every in-place write requires of its destination `dst` and `source`: no gradient
/// being recorded through `dst`, one dtype, and no two elements of `dst` in one memory
/// location (a broadcast view), where the written value would depend on the order of writes.
fn check_writable(op: &'static str, dst: &DynTensor, source: &DynTensor) -> Result<()> {
    if is_grad_enabled() && dst.requires_grad() {
        return Err(AutogradError::InPlaceOnTracked { op }.into());
    }
    if source.dtype() != dst.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            lhs: dst.dtype(),
            rhs: source.dtype(),
        });
    }
    let aliased = dst
        .dims()
        .iter()
        .zip(dst.layout().strides())
        .any(|(&d, &s)| d > 1 && s == 0);
    if aliased {
        return Err(Error::InvalidArgument {
            op,
            message: "the destination is a broadcast view (several elements share memory); update a contiguous tensor instead".into(),
        });
    }
    Ok(())
}

impl DynTensor {
    /// `self = self * scale + alpha * source` in place (`source` broadcasts to `self`).
    pub fn scale_add_(&self, scale: f64, alpha: f64, source: &DynTensor) -> Result<()> {
        const OP: &str = "in-place update";
        check_writable(OP, self, source)?;
        let context = format!(
            "in-place update of {:?} from {:?}",
            self.dims(),
            source.dims()
        );
        if crate::shape::broadcast_shapes(self.dims(), source.dims(), &context)?.as_slice()
            != self.dims()
        {
            return Err(ShapeError::Invalid {
                context,
                message: "the source must broadcast to the destination's shape".into(),
            }
            .into());
        }
        let ls = source.layout().broadcast_to(self.dims());
        Storage::scale_add(self.operand(), source.operand_as(&ls), scale, alpha)
    }

    /// `self += alpha * source` in place.
    pub fn add_scaled_(&self, alpha: f64, source: &DynTensor) -> Result<()> {
        self.scale_add_(1.0, alpha, source)
    }

    /// Copies `source`'s values into `self` in place (any dtype; both the same).
    pub fn copy_(&self, source: &DynTensor) -> Result<()> {
        if self.dtype().is_float() {
            return self.scale_add_(0.0, 1.0, source);
        }
        self.copy_exact_(source)
    }

    /// `copy_` for dtypes without arithmetic (`i64`, `bool`, `f16`): a plain overwrite.
    fn copy_exact_(&self, source: &DynTensor) -> Result<()> {
        const OP: &str = "copy_";
        check_writable(OP, self, source)?;
        if source.dims() != self.dims() {
            return Err(ShapeError::Invalid {
                context: format!("copy_ of {:?} into {:?}", source.dims(), self.dims()),
                message: "an i64, bool or f16 copy needs equal shapes".into(),
            }
            .into());
        }
        Storage::copy_into(self.operand(), source.operand())
    }

    /// Sets every element to `value` in place.
    pub fn fill_(&self, value: f64) -> Result<()> {
        self.scale_add_(0.0, 1.0, &DynTensor::scalar(value, self.dtype())?)
    }

    /// Multiplies every element by `factor` in place.
    pub fn mul_scalar_(&self, factor: f64) -> Result<()> {
        self.scale_add_(factor, 0.0, &DynTensor::scalar(0.0, self.dtype())?)
    }
}
