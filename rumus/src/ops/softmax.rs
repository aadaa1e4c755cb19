//! Softmax and log-softmax along one axis, with the max subtracted so large logits do not
//! overflow.

use super::BackwardOp;
use super::hooks::{OpCall, apply};
use crate::autograd::{Saved, is_grad_enabled, record};
use crate::error::Result;
use crate::shape::{Layout, normalize_axis};
use crate::storage::{Operand, Storage};
use crate::tensor::DynTensor;

impl DynTensor {
    fn softmax_impl(&self, axis: isize, log: bool) -> Result<DynTensor> {
        let op = if log { "log_softmax" } else { "softmax" };
        let axis = normalize_axis(axis, self.rank(), op)?;
        let out = self.softmax_untracked(axis, log, op)?;
        Ok(record(out, &[self], || BackwardOp::Softmax {
            input: Saved::new(self),
            axis,
            log,
        }))
    }

    fn softmax_untracked(&self, axis: usize, log: bool, op: &'static str) -> Result<DynTensor> {
        debug_assert_eq!(op, crate::backend::kinds::softmax_name(log));
        self.along_last(axis, &[self], |[x]| Storage::softmax(x, log))
    }

    /// A row kernel `f` (softmax, its gradient) run on `operands` (this tensor and tensors of
    /// its dims) with `axis` moved last by a view, the axis order of the result restored.
    fn along_last<const N: usize>(
        &self,
        axis: usize,
        operands: &[&DynTensor; N],
        f: impl FnOnce([Operand<'_>; N]) -> Result<triomphe::Arc<Storage>>,
    ) -> Result<DynTensor> {
        let last = self.rank() - 1;
        let mut perm: Vec<usize> = (0..self.rank()).filter(|&a| a != axis).collect();
        perm.push(axis);
        let moved: [Layout; N] = std::array::from_fn(|k| operands[k].layout().permute(&perm));
        let out = f(std::array::from_fn(|k| operands[k].operand_as(&moved[k])))?;
        let out = DynTensor::computed(out, moved[0].dims());
        if axis == last {
            return Ok(out);
        }
        let inverse = crate::ops::view::inverse_permutation(&perm);
        out.view_with(out.layout().permute(&inverse))
            .contiguous_untracked()
    }

    /// `exp(x) / sum(exp(x))` along `axis`.
    pub fn softmax(&self, axis: isize) -> Result<DynTensor> {
        apply(OpCall::Softmax { axis, log: false }, &[self], |_| {
            self.softmax_impl(axis, false)
        })
    }

    /// `x - logsumexp(x)` along `axis`, more accurate than `softmax(x).log()`.
    pub fn log_softmax(&self, axis: isize) -> Result<DynTensor> {
        apply(OpCall::Softmax { axis, log: true }, &[self], |_| {
            self.softmax_impl(axis, true)
        })
    }
}

/// Softmax along the last axis, with zeros instead of NaN in a row whose every element is
/// `-inf` (an attention query that sees no key): PyTorch's `_safe_softmax`, which its
/// `scaled_dot_product_attention` applies since 2.5, as rumus's fused attention kernels do.
/// Such rows pass no gradient back. A NaN is not `-inf`: a row holding one stays NaN.
pub(crate) fn softmax_zeroing_unseen_rows(scores: &DynTensor) -> Result<DynTensor> {
    let probabilities = scores.softmax(-1)?;
    if scores.dims().last() == Some(&0) {
        // (no keys: no probabilities)
        return Ok(probabilities);
    }
    let unseen = scores.detach().eq_scalar(f64::NEG_INFINITY)?;
    let sees_nothing = unseen
        .to_dtype(crate::DType::F32)?
        .min(&[-1], true)?
        .eq_scalar(1.0)?;
    probabilities.masked_fill(&sees_nothing, 0.0)
}

pub(crate) fn softmax_backward(
    grad: &DynTensor,
    input: &Saved,
    axis: usize,
    log: bool,
) -> Result<DynTensor> {
    let op = if log { "log_softmax" } else { "softmax" };
    if !is_grad_enabled() {
        // Not recorded: one pass over the rows, the softmax recomputed on the way.
        let x = input.get(op)?;
        return x.along_last(axis, &[x, grad], |[x, grad]| {
            Storage::softmax_backward(grad, x, log)
        });
    }
    let axis = axis as isize;
    if log {
        let x = input.get("log_softmax")?;
        // g - softmax(x) * sum(g)
        grad.sub(&x.softmax(axis)?.mul(&grad.sum(&[axis], true)?)?)
    } else {
        let y = input.get("softmax")?.softmax(axis)?;
        // y * (g - sum(g * y))
        let gy = grad.mul(&y)?;
        gy.sub(&y.mul(&gy.sum(&[axis], true)?)?)
    }
}
