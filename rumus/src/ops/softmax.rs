//! Softmax and log-softmax along one axis, with the max subtracted so large logits do not
//! overflow.

use crate::autograd::{BackwardOp, Saved, record};
use crate::backend::cpu::reduce::softmax_rows;
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
        let last = self.rank() - 1;
        // Move the axis last, compute on contiguous rows, then restore the order.
        let mut perm: Vec<usize> = (0..self.rank()).filter(|&a| a != axis).collect();
        perm.push(axis);
        let moved = self.layout().permute(&perm);
        let n = self.dims()[axis];
        let buffer = self.with_buffer(|buffer, _| -> Result<CpuBuffer> {
            Ok(with_float!(buffer, op, |data: T| {
                let rows = crate::backend::cpu::strided::map(data, &moved, |x| x);
                T::into_buffer(softmax_rows(&rows, n, log))
            }))
        })?;
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
        self.softmax_impl(axis, false)
    }

    /// `x - logsumexp(x)` along `axis`, more accurate than `softmax(x).log()`.
    pub fn log_softmax(&self, axis: isize) -> Result<DynTensor> {
        self.softmax_impl(axis, true)
    }
}

pub(crate) fn softmax_backward(
    grad: &DynTensor,
    input: &Saved,
    axis: usize,
    log: bool,
) -> Result<DynTensor> {
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
