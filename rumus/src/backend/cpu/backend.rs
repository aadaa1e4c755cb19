//! The CPU backend: host vectors in, host vectors out. Each family's kernels and their side
//! of the contract live together (`elementwise.rs`, ...); each contract method matches the
//! dtype once and hands typed slices to a kernel that walks the data.

use super::buffer::CpuBuffer;
use crate::backend::contract::{Backend, BackendMemory};
use crate::dtype::DType;
use crate::error::Result;

/// The host: rayon kernels over `Vec`s.
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu;

impl BackendMemory for CpuBuffer {
    fn dtype(&self) -> DType {
        CpuBuffer::dtype(self)
    }

    fn len(&self) -> usize {
        CpuBuffer::len(self)
    }
}

/// Refuses a result too large to allocate (the per-thread ceiling of `alloc`) before any
/// memory is taken: a broadcast view holds few values, its result holds all of them.
pub(super) fn ensure_output(op: &'static str, dims: &[usize], dtype: DType) -> Result<()> {
    crate::alloc::ensure_output(op, dims, dtype.size_in_bytes())
}

impl Backend for Cpu {
    type Memory = CpuBuffer;

    fn name(&self) -> &'static str {
        "cpu"
    }
}
