//! The backend contract: what a compute backend provides, in one trait.
//!
//! Every kernel takes its operands as [`Src`]s (the backend's memory plus the view the
//! kernel reads, already broadcast to the output where the op broadcasts) and returns fresh
//! contiguous memory of the result. Shapes, dtypes and broadcasting are checked by the op
//! before it gets here; a kernel checks only what its backend cannot do (a dtype it has no
//! kernel for, a size past a device limit).
//!
//! Each method has a default body that refuses with [`DeviceError::Unsupported`], naming the
//! op and the backend: a new backend can start with a few kernels and grow, and an op it
//! lacks is a clear error, never a silent copy to the host.

use crate::backend::kinds::{BinaryOp, CompareOp, DropoutDraws, UnaryOp};
use crate::dtype::DType;
use crate::error::{DeviceError, Error, Result};
use crate::shape::Layout;

/// Memory of one backend: host vectors, a GPU buffer.
pub trait BackendMemory {
    /// The dtype of the elements.
    fn dtype(&self) -> DType;
    /// Number of elements (not bytes).
    fn len(&self) -> usize;
    /// Whether the memory holds no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One operand of a kernel: a backend's memory and the strided view of it to read.
pub struct Src<'a, M> {
    /// The elements.
    pub memory: &'a M,
    /// Dims, strides (0 along broadcast axes) and offset, in elements.
    pub layout: &'a Layout,
}

impl<M> Clone for Src<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M> Copy for Src<'_, M> {}

impl<'a, M: BackendMemory> Src<'a, M> {
    /// `memory` read through `layout`.
    #[inline]
    pub fn new(memory: &'a M, layout: &'a Layout) -> Self {
        Src { memory, layout }
    }

    /// The dims of the view.
    #[inline]
    pub fn dims(&self) -> &'a [usize] {
        self.layout.dims()
    }

    /// The dtype of the elements.
    #[inline]
    pub fn dtype(&self) -> DType {
        self.memory.dtype()
    }

    /// Number of elements of the view.
    #[inline]
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }
}

/// What a compute backend provides. Implemented by the CPU ([`Cpu`](crate::backend::cpu::Cpu))
/// and by a wgpu device ([`GpuDevice`](crate::backend::gpu::GpuDevice)); storage picks the
/// backend of an op's operands and calls it.
pub trait Backend {
    /// The memory this backend's kernels read and write.
    type Memory: BackendMemory;

    /// The backend's name in error messages (`"cpu"`, `"wgpu"`).
    fn name(&self) -> &'static str;

    /// The error for an op this backend has no kernel for.
    fn unsupported(&self, op: &'static str) -> Error {
        DeviceError::Unsupported {
            op,
            backend: self.name(),
        }
        .into()
    }

    /// `op` of every element of `x` (float dtypes).
    fn unary(&self, x: Src<'_, Self::Memory>, op: UnaryOp) -> Result<Self::Memory> {
        let _ = x;
        Err(self.unsupported(op.name()))
    }

    /// `grad * d op(x) / dx` in one pass, for the activations whose
    /// [`gradient_in_one_pass`](UnaryOp::gradient_in_one_pass) holds, `grad` dropped out
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
