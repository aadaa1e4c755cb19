//! In-place updates of a strided destination from a strided source: the CPU's side of the
//! [`Update`] contract.

use super::backend::Cpu;
use super::buffer::CpuBuffer;
use super::strided::update_in_place;
use crate::backend::contract::{Dst, Src, Update};
use crate::element::Float;
use crate::error::{Error, Result};
use crate::shape::Layout;

impl Update for Cpu {
    fn scale_add(
        &self,
        dst: Dst<'_, CpuBuffer>,
        src: Src<'_, CpuBuffer>,
        scale: f64,
        alpha: f64,
    ) -> Result<()> {
        let (ld, ls) = (dst.layout, src.layout);
        match (dst.memory, src.memory) {
            (CpuBuffer::F32(d), CpuBuffer::F32(s)) => scale_add(d, ld, s, ls, alpha, scale),
            (CpuBuffer::F64(d), CpuBuffer::F64(s)) => scale_add(d, ld, s, ls, alpha, scale),
            (d, _) => {
                return Err(Error::DType {
                    op: "in-place update",
                    expected: "a floating-point tensor",
                    found: d.dtype(),
                });
            }
        }
        Ok(())
    }

    fn copy_into(&self, dst: Dst<'_, CpuBuffer>, src: Src<'_, CpuBuffer>) -> Result<()> {
        let (ld, ls) = (dst.layout, src.layout);
        match (dst.memory, src.memory) {
            (CpuBuffer::F32(d), CpuBuffer::F32(s)) => update_in_place(d, ld, s, ls, |_, s| s),
            (CpuBuffer::F64(d), CpuBuffer::F64(s)) => update_in_place(d, ld, s, ls, |_, s| s),
            (CpuBuffer::I64(d), CpuBuffer::I64(s)) => update_in_place(d, ld, s, ls, |_, s| s),
            (CpuBuffer::Bool(d), CpuBuffer::Bool(s)) => update_in_place(d, ld, s, ls, |_, s| s),
            (CpuBuffer::F16(d), CpuBuffer::F16(s)) => update_in_place(d, ld, s, ls, |_, s| s),
            (d, s) => {
                return Err(Error::DTypeMismatch {
                    op: "copy_",
                    lhs: d.dtype(),
                    rhs: s.dtype(),
                });
            }
        }
        Ok(())
    }
}

fn scale_add<T: Float>(dst: &mut [T], ld: &Layout, src: &[T], ls: &Layout, alpha: f64, scale: f64) {
    let (alpha, scale) = (T::from_f64(alpha), T::from_f64(scale));
    if scale == T::ZERO {
        // An overwrite must not keep NaN/inf from the old value (NaN * 0 is NaN).
        update_in_place(dst, ld, src, ls, |_, s| alpha * s);
    } else {
        update_in_place(dst, ld, src, ls, |d, s| d * scale + alpha * s);
    }
}
