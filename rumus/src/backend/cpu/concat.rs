//! Joining contiguous buffers along one axis; the CPU's side of the [`Join`] contract.

use super::backend::{Cpu, ensure_output};
use super::buffer::{CpuBuffer, append};
use crate::backend::contract::{Allocate, Join, Pointwise, Src};
use crate::error::Result;

impl Join for Cpu {
    fn cat(&self, parts: &[Src<'_, CpuBuffer>], axis: usize, dims: &[usize]) -> Result<CpuBuffer> {
        let dtype = parts[0].dtype();
        ensure_output("cat", dims, dtype)?;
        if crate::shape::checked_numel(dims, "cat")? == 0 {
            // Nothing to copy (and the sizes around the axis may multiply past usize).
            return self.full(dims, 0.0, dtype);
        }
        let first = parts[0].dims();
        let outer: usize = first[..axis].iter().product();
        let inner: usize = first[axis + 1..].iter().product();
        let lens: Vec<usize> = parts.iter().map(|part| part.dims()[axis]).collect();
        let buffers: Vec<CpuBuffer> = parts
            .iter()
            .map(|&part| self.copy(part))
            .collect::<Result<_>>()?;
        Ok(match dtype {
            crate::DType::F32 => concat_variant!(F32, buffers, lens, outer, inner),
            crate::DType::F64 => concat_variant!(F64, buffers, lens, outer, inner),
            crate::DType::F16 => concat_variant!(F16, buffers, lens, outer, inner),
            crate::DType::BF16 => concat_variant!(BF16, buffers, lens, outer, inner),
            crate::DType::I64 => concat_variant!(I64, buffers, lens, outer, inner),
            crate::DType::Bool => concat_variant!(Bool, buffers, lens, outer, inner),
        })
    }
}

/// [`concat`] of `buffers` (all of variant `$variant`, the op checked one dtype).
macro_rules! concat_variant {
    ($variant:ident, $buffers:expr, $lens:expr, $outer:expr, $inner:expr) => {{
        let parts: Vec<(&[_], usize)> = $buffers
            .iter()
            .zip(&$lens)
            .map(|(b, &len)| match b {
                CpuBuffer::$variant(v) => (v.as_slice(), len),
                _ => unreachable!("dtypes checked equal"),
            })
            .collect();
        CpuBuffer::$variant(concat(&parts, $outer, $inner))
    }};
}
use concat_variant;

/// Concatenates `parts` (each contiguous `[outer, part_len, inner]`) along the middle axis.
fn concat<T: Copy>(parts: &[(&[T], usize)], outer: usize, inner: usize) -> Vec<T> {
    let total: usize = parts.iter().map(|(_, len)| len).sum();
    let mut out = Vec::with_capacity(outer * total * inner);
    for o in 0..outer {
        for (data, len) in parts {
            let run = len * inner;
            append(&mut out, &data[o * run..(o + 1) * run]);
        }
    }
    out
}
