//! Joining as storage runs it, for any number of operands.

use super::Storage;
use super::dispatch::{Operand, run_many};
use crate::backend::Join;
use crate::backend::cpu::Cpu;
use crate::backend::gpu::GpuDevice;
use crate::error::Result;

impl Storage {
    /// `parts` (checked to fit) joined along `axis` into contiguous memory of `dims`.
    pub(crate) fn cat(parts: &[Operand<'_>], axis: usize, dims: &[usize]) -> Result<Storage> {
        run_many(
            "cat",
            parts,
            |be: &Cpu, parts| be.cat(parts, axis, dims),
            |be: &GpuDevice, parts| be.cat(parts, axis, dims),
        )
    }
}
