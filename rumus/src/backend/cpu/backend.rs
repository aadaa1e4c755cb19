//! The CPU backend: host vectors in, host vectors out. Each family's kernels and their side
//! of the contract live together (`elementwise.rs`, ...); each contract method matches the
//! dtype once and hands typed slices to a kernel that walks the data.

use super::buffer::CpuBuffer;
use crate::alloc::try_with_capacity;
use crate::backend::contract::{Allocate, Backend, BackendMemory};
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

impl Allocate for Cpu {
    fn full(&self, dims: &[usize], value: f64, dtype: DType) -> Result<CpuBuffer> {
        filled(dims, dtype, value)
    }
}

/// `n` copies of `value`: in a pooled buffer when one is free (zero-filled gradients and
/// masks every step otherwise fault in fresh pages), else a fallible allocation.
fn try_filled_vec<T: Copy + 'static>(n: usize, value: T, dims: &[usize]) -> Result<Vec<T>> {
    if let Some(pooled) = crate::backend::cpu::pool::pooled_filled(n, value) {
        return Ok(pooled);
    }
    let mut out = try_with_capacity("full", &format!("the tensor {dims:?}"), n)?;
    out.resize(n, value);
    Ok(out)
}

fn filled(dims: &[usize], dtype: DType, value: f64) -> Result<CpuBuffer> {
    let n = crate::shape::checked_numel(dims, "full")?;
    Ok(match dtype {
        DType::F32 => CpuBuffer::F32(try_filled_vec(n, value as f32, dims)?),
        DType::F64 => CpuBuffer::F64(try_filled_vec(n, value, dims)?),
        DType::F16 => CpuBuffer::F16(try_filled_vec(
            n,
            crate::element::f16_from_f64(value),
            dims,
        )?),
        DType::BF16 => CpuBuffer::BF16(try_filled_vec(
            n,
            crate::element::bf16_from_f64(value),
            dims,
        )?),
        DType::I64 => CpuBuffer::I64(try_filled_vec(n, value as i64, dims)?),
        DType::Bool => CpuBuffer::Bool(try_filled_vec(n, value != 0.0, dims)?),
    })
}
