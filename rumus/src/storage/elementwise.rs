//! Element-wise ops as storage runs them: each names its kernel once, and [`on_backend!`]
//! instantiates the call for every backend.

use super::dispatch::{Operand, on_backend};
use super::{CpuBuffer, Storage};
use crate::backend::cpu::Cpu;
use crate::backend::kinds::{BinaryOp, CompareOp, DropoutDraws, UnaryOp};
use crate::backend::{Pointwise, Src};
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Layout;

use triomphe::Arc;

impl Storage {
    /// `op` of every element.
    pub(crate) fn unary(x: Operand<'_>, op: UnaryOp) -> Result<Arc<Storage>> {
        on_backend!(op.name(), [x], |be, [x]| be.unary(x, op))
    }

    /// The one-pass activation gradient (of `grad` dropped out with `draws` first, when
    /// given), when the backend has a kernel for it.
    pub(crate) fn activation_grad(
        grad: Operand<'_>,
        x: Operand<'_>,
        op: UnaryOp,
        draws: Option<DropoutDraws>,
    ) -> Result<Option<Arc<Storage>>> {
        on_backend!(op.name(), [grad, x], |be, [g, x]| be
            .activation_grad(g, x, op, draws))
    }

    /// `x` with dropout's `draws` applied.
    pub(crate) fn dropout(x: Operand<'_>, draws: DropoutDraws) -> Result<Arc<Storage>> {
        on_backend!("dropout", [x], |be, [x]| be.dropout(x, draws))
    }

    /// `dropout(op(x))` in one pass, when the backend has a kernel for it.
    pub(crate) fn unary_dropout(
        x: Operand<'_>,
        op: UnaryOp,
        draws: DropoutDraws,
    ) -> Result<Option<Arc<Storage>>> {
        on_backend!(op.name(), [x], |be, [x]| be.unary_dropout(x, op, draws))
    }

    /// `a op b`, both viewed with the output's dims.
    pub(crate) fn binary(a: Operand<'_>, b: Operand<'_>, op: BinaryOp) -> Result<Arc<Storage>> {
        on_backend!(op.name(), [a, b], |be, [a, b]| be.binary(a, b, op))
    }

    /// `a op b` as a `bool` mask, both viewed with the output's dims.
    pub(crate) fn compare(a: Operand<'_>, b: Operand<'_>, op: CompareOp) -> Result<Arc<Storage>> {
        on_backend!("compare", [a, b], |be, [a, b]| be.compare(a, b, op))
    }

    /// `condition ? on_true : on_false`, all viewed with the output's dims.
    pub(crate) fn select(
        condition: Operand<'_>,
        on_true: Operand<'_>,
        on_false: Operand<'_>,
    ) -> Result<Arc<Storage>> {
        on_backend!("where", [condition, on_true, on_false], |be, [c, t, f]| be
            .select(c, t, f))
    }

    /// `a and b` of two masks viewed with the output's dims.
    pub(crate) fn logical_and(a: Operand<'_>, b: Operand<'_>) -> Result<Arc<Storage>> {
        on_backend!("logical_and", [a, b], |be, [a, b]| be.logical_and(a, b))
    }

    /// `not x` of a mask.
    pub(crate) fn logical_not(x: Operand<'_>) -> Result<Arc<Storage>> {
        on_backend!("logical_not", [x], |be, [x]| be.logical_not(x))
    }

    /// The elements converted to `dtype`.
    pub(crate) fn cast(x: Operand<'_>, dtype: DType) -> Result<Arc<Storage>> {
        on_backend!("to_dtype", [x], |be, [x]| be.cast(x, dtype))
    }

    /// A contiguous copy of the view.
    pub(crate) fn copy(x: Operand<'_>) -> Result<Arc<Storage>> {
        on_backend!("contiguous", [x], |be, [x]| be.copy(x))
    }

    /// The elements of the view `layout` in host memory, row-major: the host's own, or a copy
    /// of GPU memory read back (a counted fallback transfer) for host-only paths.
    pub(crate) fn host_copy(&self, layout: &Layout) -> Result<CpuBuffer> {
        let host = self.read()?;
        Cpu.copy(Src::new(&*host, layout))
    }
}
