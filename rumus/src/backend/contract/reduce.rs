//! Reductions: sums and extrema over axes, the index of an extremum, and the row kernels
//! along one axis (softmax, its gradient, log-sum-exp).

use super::{Backend, Src};
use crate::backend::kinds::{Reduction, softmax_name};
use crate::error::Result;

/// Reduction kernels. Each result is fresh contiguous memory laid out over the axes the op
/// keeps (a reduced axis kept with length 1 changes no layout).
pub trait Reduce: Backend {
    /// `kind` of each group of `x` (float) over `axes` (sorted, distinct); extrema of empty
    /// axes are refused by the op before it gets here.
    fn reduce(
        &self,
        x: Src<'_, Self::Memory>,
        axes: &[usize],
        kind: Reduction,
    ) -> Result<Self::Memory> {
        let _ = (x, axes);
        Err(self.unsupported(kind.name()))
    }

    /// The index (`i64`) of the largest (`max`) or smallest value of `x` (float) along
    /// `axis`, which is not empty; the first one wins ties, a NaN wins over numbers.
    fn arg_reduce(&self, x: Src<'_, Self::Memory>, axis: usize, max: bool) -> Result<Self::Memory> {
        let _ = (x, axis);
        Err(self.unsupported(if max { "argmax" } else { "argmin" }))
    }

    /// Softmax (log-softmax with `log`) of each row of `x` (float) along its last axis; the
    /// result is contiguous with `x`'s dims. (The op moves its axis last with a view.)
    fn softmax(&self, x: Src<'_, Self::Memory>, log: bool) -> Result<Self::Memory> {
        let _ = x;
        Err(self.unsupported(softmax_name(log)))
    }

    /// The input gradient of [`softmax`](Self::softmax) at `x` given the output gradient
    /// `grad` (viewed with `x`'s dims), the softmax recomputed on the way.
    fn softmax_backward(
        &self,
        grad: Src<'_, Self::Memory>,
        x: Src<'_, Self::Memory>,
        log: bool,
    ) -> Result<Self::Memory> {
        let _ = (grad, x);
        Err(self.unsupported(softmax_name(log)))
    }

    /// Each row's log-sum-exp of `x` (float) along `axis`, which the result keeps with length
    /// 1: one pass reading `x`, nothing of its size written. An infinite maximum is the
    /// result, and a row holding a NaN gives NaN.
    fn logsumexp_rows(&self, x: Src<'_, Self::Memory>, axis: usize) -> Result<Self::Memory> {
        let _ = (x, axis);
        Err(self.unsupported("logsumexp"))
    }
}
