//! Custom ops as storage runs them: any number of inputs, on the backend that holds them.

use std::cell::Cell;

use super::Storage;
use super::dispatch::{IntoStorage, Operand, on_backend_many};
use crate::backend::Custom;
use crate::backend::kinds::CustomKernel;
use crate::error::Result;

use triomphe::Arc;

impl Storage {
    /// The op's forward pass on its inputs' backend, shaped `out_dims`; `None` where the
    /// op's own CPU kernel runs instead (inputs on the host).
    pub(crate) fn custom_forward(
        kernel: &CustomKernel,
        inputs: &[Operand<'_>],
        out_dims: &[usize],
    ) -> Result<Option<Arc<Storage>>> {
        on_backend_many!(kernel.name, inputs, |be, srcs| be
            .custom_forward(kernel, srcs, out_dims))
    }

    /// The gradients of the inputs that `needs` asks for, from the forward pass's `output`
    /// and its gradient `grad`; `None` where the op's own CPU kernel runs instead.
    pub(crate) fn custom_backward(
        kernel: &CustomKernel,
        inputs: &[Operand<'_>],
        (output, grad): (Operand<'_>, Operand<'_>),
        needs: &[bool],
    ) -> Result<Option<Vec<Option<Arc<Storage>>>>> {
        let n = inputs.len();
        let all: Vec<Operand<'_>> = inputs.iter().copied().chain([output, grad]).collect();
        // The gradients leave each backend's closure through this cell.
        let grads = Cell::new(None);
        on_backend_many!(kernel.name, &all, |be, srcs| {
            let saved = (srcs[n], srcs[n + 1]);
            let out = be.custom_backward(kernel, &srcs[..n], saved, needs)?;
            grads.set(out.map(|g| g.into_iter().map(IntoStorage::into_storage).collect()));
            Ok(())
        })?;
        Ok(grads.into_inner())
    }
}
