//! Reductions as storage runs them: each names its kernel once, and [`on_backend!`]
//! instantiates the call for every backend.

use super::Storage;
use super::dispatch::{Operand, on_backend};
use crate::backend::Reduce;
use crate::backend::kinds::{Reduction, softmax_name};
use crate::error::Result;

use triomphe::Arc;

impl Storage {
    /// `kind` over `axes` (sorted, distinct), laid out over the kept axes.
    pub(crate) fn reduce(x: Operand<'_>, axes: &[usize], kind: Reduction) -> Result<Arc<Storage>> {
        on_backend!(kind.name(), [x], |be, [x]| be.reduce(x, axes, kind))
    }

    /// The `i64` index of the largest (`max`) or smallest value along `axis`.
    pub(crate) fn arg_reduce(x: Operand<'_>, axis: usize, max: bool) -> Result<Arc<Storage>> {
        let op = if max { "argmax" } else { "argmin" };
        on_backend!(op, [x], |be, [x]| be.arg_reduce(x, axis, max))
    }

    /// Softmax (log-softmax with `log`) along the last axis of the view.
    pub(crate) fn softmax(x: Operand<'_>, log: bool) -> Result<Arc<Storage>> {
        on_backend!(softmax_name(log), [x], |be, [x]| be.softmax(x, log))
    }

    /// The input gradient of softmax along the last axis of both views, recomputed at `x`.
    pub(crate) fn softmax_backward(
        grad: Operand<'_>,
        x: Operand<'_>,
        log: bool,
    ) -> Result<Arc<Storage>> {
        on_backend!(softmax_name(log), [grad, x], |be, [g, x]| be
            .softmax_backward(g, x, log))
    }

    /// Each row's log-sum-exp along `axis`, which the result keeps with length 1.
    pub(crate) fn logsumexp_rows(
        x: Operand<'_>,
        axis: usize,
        op: &'static str,
    ) -> Result<Arc<Storage>> {
        on_backend!(op, [x], |be, [x]| be.logsumexp_rows(x, axis))
    }
}
