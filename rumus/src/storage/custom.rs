//! Custom ops as storage runs them: any number of inputs, on the backend that holds them.

use std::cell::Cell;

use super::Storage;
use super::dispatch::{Operand, run_many};
use crate::backend::Custom;
use crate::backend::cpu::Cpu;
use crate::backend::gpu::GpuDevice;
use crate::backend::kinds::CustomKernel;
use crate::error::Result;

impl Storage {
    /// The op's forward pass on its inputs' backend, shaped `out_dims`; `None` where the
    /// op's own CPU kernel runs instead (inputs on the host).
    pub(crate) fn custom_forward(
        kernel: &CustomKernel,
        inputs: &[Operand<'_>],
        out_dims: &[usize],
    ) -> Result<Option<Storage>> {
        run_many(
            kernel.name,
            inputs,
            |be: &Cpu, srcs| be.custom_forward(kernel, srcs, out_dims),
            |be: &GpuDevice, srcs| be.custom_forward(kernel, srcs, out_dims),
        )
    }

    /// The gradients of the inputs that `needs` asks for, from the forward pass's `output`
    /// and its gradient `grad`; `None` where the op's own CPU kernel runs instead.
    pub(crate) fn custom_backward(
        kernel: &CustomKernel,
        inputs: &[Operand<'_>],
        (output, grad): (Operand<'_>, Operand<'_>),
        needs: &[bool],
    ) -> Result<Option<Vec<Option<Storage>>>> {
        let n = inputs.len();
        let all: Vec<Operand<'_>> = inputs.iter().copied().chain([output, grad]).collect();
        // The gradients leave each backend's closure through this cell.
        let grads = Cell::new(None);
        run_many(
            kernel.name,
            &all,
            |be: &Cpu, srcs| {
                let saved = (srcs[n], srcs[n + 1]);
                let out = be.custom_backward(kernel, &srcs[..n], saved, needs)?;
                grads.set(out.map(|g| g.into_iter().map(|g| g.map(Storage::new)).collect()));
                Ok(())
            },
            |be: &GpuDevice, srcs| {
                let saved = (srcs[n], srcs[n + 1]);
                let out = be.custom_backward(kernel, &srcs[..n], saved, needs)?;
                grads.set(out.map(|g| g.into_iter().map(|g| g.map(Storage::on_gpu)).collect()));
                Ok(())
            },
        )?;
        Ok(grads.into_inner())
    }
}
