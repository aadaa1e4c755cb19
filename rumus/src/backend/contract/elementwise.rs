//! Element-wise kernels: functions of one element, arithmetic and comparisons of two,
//! `where`, masks, dtype conversion, copies and dropout.

use super::{Backend, Src};
use crate::backend::kinds::{BinaryOp, CompareOp, DropoutDraws, UnaryOp};
use crate::dtype::DType;
use crate::error::Result;

/// Element-wise kernels. Views arrive broadcast to the output's dims where the op broadcasts.
pub trait Pointwise: Backend {
    /// `op` of every element of `x` (float dtypes).
    fn unary(&self, x: Src<'_, Self::Memory>, op: UnaryOp) -> Result<Self::Memory> {
        let _ = x;
        Err(self.unsupported(op.name()))
    }

    /// `grad * d op(x) / dx` in one pass, for the activations whose
    /// `UnaryOp::gradient_in_one_pass` holds, `grad` dropped out
    /// with `draws` first when given (the gradient of `dropout(op(x))`); `None` where the
    /// backend has no such kernel (the op then composes the gradient from other ops).
    fn activation_grad(
        &self,
        grad: Src<'_, Self::Memory>,
        x: Src<'_, Self::Memory>,
        op: UnaryOp,
        draws: Option<DropoutDraws>,
    ) -> Result<Option<Self::Memory>> {
        let _ = (grad, x, op, draws);
        Ok(None)
    }

    /// `x` (float) with `draws` applied: each element zeroed or scaled.
    fn dropout(&self, x: Src<'_, Self::Memory>, draws: DropoutDraws) -> Result<Self::Memory> {
        let _ = (x, draws);
        Err(self.unsupported("dropout"))
    }

    /// `dropout(op(x))` in one pass; `None` where the backend has no fused kernel (the op
    /// then runs the two apart).
    fn unary_dropout(
        &self,
        x: Src<'_, Self::Memory>,
        op: UnaryOp,
        draws: DropoutDraws,
    ) -> Result<Option<Self::Memory>> {
        let _ = (x, op, draws);
        Ok(None)
    }

    /// `a op b` element-wise; both views have the output's dims (float dtypes, equal).
    fn binary(
        &self,
        a: Src<'_, Self::Memory>,
        b: Src<'_, Self::Memory>,
        op: BinaryOp,
    ) -> Result<Self::Memory> {
        let _ = (a, b);
        Err(self.unsupported(op.name()))
    }

    /// `a op b` as a `bool` mask; both views have the output's dims (equal dtypes).
    fn compare(
        &self,
        a: Src<'_, Self::Memory>,
        b: Src<'_, Self::Memory>,
        op: CompareOp,
    ) -> Result<Self::Memory> {
        let _ = (a, b, op);
        Err(self.unsupported("compare"))
    }

    /// `condition ? on_true : on_false`; all three views have the output's dims, the values
    /// one dtype and the condition `bool`.
    fn select(
        &self,
        condition: Src<'_, Self::Memory>,
        on_true: Src<'_, Self::Memory>,
        on_false: Src<'_, Self::Memory>,
    ) -> Result<Self::Memory> {
        let _ = (condition, on_true, on_false);
        Err(self.unsupported("where"))
    }

    /// `a and b` of two `bool` masks viewed with the output's dims.
    fn logical_and(
        &self,
        a: Src<'_, Self::Memory>,
        b: Src<'_, Self::Memory>,
    ) -> Result<Self::Memory> {
        let _ = (a, b);
        Err(self.unsupported("logical_and"))
    }

    /// `not x` of a `bool` mask.
    fn logical_not(&self, x: Src<'_, Self::Memory>) -> Result<Self::Memory> {
        let _ = x;
        Err(self.unsupported("logical_not"))
    }

    /// The elements of `x` converted to `dtype`.
    fn cast(&self, x: Src<'_, Self::Memory>, dtype: DType) -> Result<Self::Memory> {
        let _ = (x, dtype);
        Err(self.unsupported("to_dtype"))
    }

    /// A contiguous copy of the view `x`.
    fn copy(&self, x: Src<'_, Self::Memory>) -> Result<Self::Memory> {
        let _ = x;
        Err(self.unsupported("contiguous"))
    }
}
