//! Custom ops' own kernels: a backend runs the op's kernels written for it (WGSL for a GPU),
//! or leaves the op to its CPU kernels, which the op runs on host memory itself.

use super::{Backend, Src};
use crate::backend::kinds::CustomKernel;
use crate::error::Result;

/// The kernels of ops defined outside rumus. `inputs` are contiguous, of one float dtype.
pub trait Custom: Backend {
    /// The forward pass into fresh memory of `out_dims`; `None` where the op's CPU kernel
    /// runs instead (the host).
    fn custom_forward(
        &self,
        kernel: &CustomKernel,
        inputs: &[Src<'_, Self::Memory>],
        out_dims: &[usize],
    ) -> Result<Option<Self::Memory>> {
        let _ = (inputs, out_dims);
        Err(self.unsupported(kernel.name))
    }

    /// The backward pass: the gradient of every input whose `needs` entry is true, from the
    /// forward pass's `output` and its gradient `grad`; `None` where the op's CPU kernel runs
    /// instead (the host).
    fn custom_backward(
        &self,
        kernel: &CustomKernel,
        inputs: &[Src<'_, Self::Memory>],
        (output, grad): (Src<'_, Self::Memory>, Src<'_, Self::Memory>),
        needs: &[bool],
    ) -> Result<Option<Vec<Option<Self::Memory>>>> {
        let _ = (inputs, output, grad, needs);
        Err(self.unsupported(kernel.name))
    }
}
