//! Gradient clipping on the gradients in a store, before an optimizer step.

use crate::autograd::{GradientStore, no_grad};
use crate::error::Result;
use crate::tensor::DynTensor;

/// Scales the gradients of `params` so their joint L2 norm is at most `max_norm`, like
/// PyTorch's `clip_grad_norm_`. Returns the norm before clipping.
pub fn clip_grad_norm(
    grads: &mut GradientStore,
    params: &[DynTensor],
    max_norm: f64,
) -> Result<f64> {
    let _guard = no_grad();
    let mut total = 0.0;
    // GPU gradients are summed on the device (in f32: no f64 there) and read back once.
    let mut on_gpu: Option<DynTensor> = None;
    for p in params {
        let Some(g) = grads.get(p) else { continue };
        if g.device().is_gpu() {
            let squares = g.mul(g)?.sum_all()?;
            on_gpu = Some(match on_gpu {
                Some(sum) => sum.add(&squares)?,
                None => squares,
            });
        } else {
            let g = g.to_dtype(crate::DType::F64)?;
            total += g.mul(&g)?.sum_all()?.item::<f64>()?;
        }
    }
    if let Some(sum) = on_gpu {
        total += f64::from(sum.item::<f32>()?);
    }
    let norm = total.sqrt();
    let scale = max_norm / (norm + 1e-6);
    if scale < 1.0 {
        rewrite(grads, params, |g| g.mul_scalar(scale))?;
    }
    Ok(norm)
}

/// Clamps every gradient element of `params` to `[-clip, clip]`.
pub fn clip_grad_value(grads: &mut GradientStore, params: &[DynTensor], clip: f64) -> Result<()> {
    let _guard = no_grad();
    rewrite(grads, params, |g| g.clamp(-clip, clip))
}

/// Replaces each stored gradient by `f(gradient)` (stored gradients may be shared or broadcast
/// views, so they are replaced rather than written in place).
fn rewrite(
    grads: &mut GradientStore,
    params: &[DynTensor],
    f: impl Fn(&DynTensor) -> Result<DynTensor>,
) -> Result<()> {
    for p in params {
        if let (Some(id), Some(g)) = (p.id(), grads.remove(p)) {
            grads.accumulate(id, f(&g)?)?;
        }
    }
    Ok(())
}
