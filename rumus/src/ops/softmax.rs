//! Softmax and log-softmax along one axis, with the max subtracted so large logits do not
//! overflow.

use super::BackwardOp;
use crate::autograd::{Saved, is_grad_enabled, record};
use crate::backend::cpu::reduce::{softmax_backward_rows, softmax_rows};
use crate::element::Element;
use crate::error::Result;
use crate::shape::normalize_axis;
use crate::storage::CpuBuffer;
use crate::tensor::{DynTensor, with_float};

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
        #[cfg(feature = "gpu")]
        if let Some(gpu) = crate::device::gpu_of(op, &[self])? {
            return gpu.softmax(self, axis, log);
        }
        self.softmax_rows_on_host(None, axis, log, op)
    }

    /// Softmax (with `grad`: its input gradient) of the host rows along `axis`: the axis is
    /// moved last, the rows computed contiguously, and the axis order restored.
    fn softmax_rows_on_host(
        &self,
        grad: Option<&DynTensor>,
        axis: usize,
        log: bool,
        op: &'static str,
    ) -> Result<DynTensor> {
        // The rows are copied out, and the result holds as many elements again.
        crate::alloc::ensure_output(op, self.dims(), self.dtype().size_in_bytes())?;
        let last = self.rank() - 1;
        let mut perm: Vec<usize> = (0..self.rank()).filter(|&a| a != axis).collect();
        perm.push(axis);
        let moved = self.layout().permute(&perm);
        let n = self.dims()[axis];
        // The gradient's rows are copied out before the input is read, so this op never
        // holds two storages' locks at once (no lock-order deadlock with other threads).
        let grad_rows = grad
            .map(|grad| {
                grad.with_buffer(|buffer, layout| {
                    let rows = layout.permute(&perm);
                    crate::storage::map_buffer!(buffer, |g| crate::backend::cpu::strided::map(
                        g,
                        &rows,
                        |x| x
                    ))
                })
            })
            .transpose()?;
        let buffer = self.with_buffer(|buffer, _| -> Result<CpuBuffer> {
            Ok(with_float!(buffer, op, |data: T| {
                let rows = crate::backend::cpu::strided::map(data, &moved, |x| x);
                let values = match (grad, &grad_rows) {
                    (Some(grad), Some(grad_rows)) => {
                        let grad_rows = T::slice(grad_rows).ok_or(crate::Error::DType {
                            op,
                            expected: "a gradient of the input's dtype",
                            found: grad.dtype(),
                        })?;
                        softmax_backward_rows(&rows, grad_rows, n, log)
                    }
                    _ => softmax_rows(&rows, n, log),
                };
                T::into_buffer(values)
            }))
        })??;
        let moved_dims: Vec<usize> = perm.iter().map(|&p| self.dims()[p]).collect();
        let mut out = DynTensor::from_buffer(buffer, &moved_dims);
        if axis != last {
            let inverse = crate::ops::view::inverse_permutation(&perm);
            out = out
                .view_with(out.layout().permute(&inverse))
                .contiguous_untracked()?;
        }
        Ok(out)
    }

    /// `exp(x) / sum(exp(x))` along `axis`.
    pub fn softmax(&self, axis: isize) -> Result<DynTensor> {
        crate::onnx::op(
            || self.softmax_untraced(axis),
            |e, out| {
                let axis = normalize_axis(axis, self.rank(), "softmax")?;
                crate::onnx::onnx_softmax(e, self, axis, false, out)
            },
        )
    }

    fn softmax_untraced(&self, axis: isize) -> Result<DynTensor> {
        self.softmax_impl(axis, false)
    }

    /// `x - logsumexp(x)` along `axis`, more accurate than `softmax(x).log()`.
    pub fn log_softmax(&self, axis: isize) -> Result<DynTensor> {
        crate::onnx::op(
            || self.log_softmax_untraced(axis),
            |e, out| {
                let axis = normalize_axis(axis, self.rank(), "log_softmax")?;
                crate::onnx::onnx_softmax(e, self, axis, true, out)
            },
        )
    }

    fn log_softmax_untraced(&self, axis: isize) -> Result<DynTensor> {
        self.softmax_impl(axis, true)
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
        #[cfg(feature = "gpu")]
        if let Some(gpu) = crate::device::gpu_of(op, &[grad, x])? {
            return gpu.softmax_backward(grad, x, axis, log);
        }
        return x.softmax_rows_on_host(Some(grad), axis, log, op);
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
