//! In-place updates, for optimizers and buffers (running statistics). Each write bumps the
//! storage version, so a graph that saved the old values refuses to back-propagate instead of
//! silently using the new ones. While recording, tensors that require a gradient may not be
//! updated in place (wrap the update in `no_grad`).

use crate::autograd::is_grad_enabled;
use crate::backend::cpu::strided::update_in_place;
use crate::element::Float;
use crate::error::{AutogradError, Error, Result, ShapeError};
use crate::shape::Layout;
use crate::storage::CpuBuffer;
use crate::tensor::DynTensor;

fn apply<T: Float>(dst: &mut [T], ld: &Layout, src: &[T], ls: &Layout, alpha: f64, scale: f64) {
    let (alpha, scale) = (T::from_f64(alpha), T::from_f64(scale));
    if scale == T::ZERO {
        // An overwrite must not keep NaN/inf from the old value (NaN * 0 is NaN).
        update_in_place(dst, ld, src, ls, |_, s| alpha * s);
    } else {
        update_in_place(dst, ld, src, ls, |d, s| d * scale + alpha * s);
    }
}

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
        #[cfg(feature = "gpu")]
        if let Some(gpu) = crate::device::gpu_of(OP, &[self, source])? {
            let ls = source.layout().broadcast_to(self.dims());
            return gpu.scale_add(self, (source, &ls), scale, alpha);
        }
        // Copy the source first so no read lock is held while the write lock is taken: two
        // threads updating `x` from `y` and `y` from `x` would otherwise deadlock.
        let source_buffer = source.to_contiguous_buffer()?;
        let ls = Layout::contiguous(source.dims()).broadcast_to(self.dims());
        let ld = self.layout().clone();
        let mut dst = self.storage().write()?;
        match (&mut *dst, &source_buffer) {
            (CpuBuffer::F32(d), CpuBuffer::F32(s)) => apply(d, &ld, s, &ls, alpha, scale),
            (CpuBuffer::F64(d), CpuBuffer::F64(s)) => apply(d, &ld, s, &ls, alpha, scale),
            (d, _) => {
                return Err(Error::DType {
                    op: OP,
                    expected: "a floating-point tensor",
                    found: d.dtype(),
                });
            }
        }
        Ok(())
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
        #[cfg(feature = "gpu")]
        if let Some(gpu) = crate::device::gpu_of(OP, &[self, source])? {
            return gpu.copy_into(self, (source, source.layout()));
        }
        let source_buffer = source.to_contiguous_buffer()?;
        let ls = Layout::contiguous(source.dims());
        let ld = self.layout().clone();
        let mut dst = self.storage().write()?;
        match (&mut *dst, &source_buffer) {
            (CpuBuffer::I64(d), CpuBuffer::I64(s)) => update_in_place(d, &ld, s, &ls, |_, s| s),
            (CpuBuffer::Bool(d), CpuBuffer::Bool(s)) => update_in_place(d, &ld, s, &ls, |_, s| s),
            (CpuBuffer::F16(d), CpuBuffer::F16(s)) => update_in_place(d, &ld, s, &ls, |_, s| s),
            (d, s) => {
                return Err(Error::DTypeMismatch {
                    op: OP,
                    lhs: d.dtype(),
                    rhs: s.dtype(),
                });
            }
        }
        Ok(())
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
