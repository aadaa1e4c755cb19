//! The CPU backend's side of the contract: host vectors in, host vectors out. Each method
//! matches the dtype once and hands typed slices to a kernel that walks the data.

use super::buffer::{CpuBuffer, map_buffer, with_float};
use super::elementwise;
use super::strided::{map, zip_map};
use crate::backend::contract::{Backend, BackendMemory, Src};
use crate::backend::kinds::{BinaryOp, CompareOp, DropoutDraws, UnaryOp};
use crate::dtype::DType;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::shape::Layout;

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
fn ensure_output(op: &'static str, dims: &[usize], dtype: DType) -> Result<()> {
    crate::alloc::ensure_output(op, dims, dtype.size_in_bytes())
}

impl Backend for Cpu {
    type Memory = CpuBuffer;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn unary(&self, x: Src<'_, CpuBuffer>, op: UnaryOp) -> Result<CpuBuffer> {
        ensure_output(op.name(), x.dims(), x.dtype())?;
        Ok(with_float!(x.memory, op.name(), |data: T| T::into_buffer(
            elementwise::unary(data, x.layout, op)
        )))
    }

    fn activation_grad(
        &self,
        grad: Src<'_, CpuBuffer>,
        x: Src<'_, CpuBuffer>,
        op: UnaryOp,
        draws: Option<DropoutDraws>,
    ) -> Result<Option<CpuBuffer>> {
        if !op.gradient_in_one_pass() || draws.is_some() {
            return Ok(None);
        }
        let (lg, lx) = (grad.layout, x.layout);
        Ok(match (grad.memory, x.memory) {
            (CpuBuffer::F32(g), CpuBuffer::F32(v)) => Some(f32::into_buffer(
                elementwise::activation_grad(g, lg, v, lx, op),
            )),
            (CpuBuffer::F64(g), CpuBuffer::F64(v)) => Some(f64::into_buffer(
                elementwise::activation_grad(g, lg, v, lx, op),
            )),
            _ => None,
        })
    }

    fn dropout(&self, x: Src<'_, CpuBuffer>, draws: DropoutDraws) -> Result<CpuBuffer> {
        if !x.layout.is_contiguous() {
            let copy = self.copy(x)?;
            let layout = Layout::contiguous(x.dims());
            return self.dropout(Src::new(&copy, &layout), draws);
        }
        let range = x.layout.offset()..x.layout.offset() + x.numel();
        let DropoutDraws { p, scale, seed } = draws;
        match x.memory {
            CpuBuffer::F32(v) => Ok(f32::into_buffer(super::dropout::dropout(
                &v[range],
                p,
                scale as f32,
                seed,
            ))),
            CpuBuffer::F64(v) => Ok(f64::into_buffer(super::dropout::dropout(
                &v[range], p, scale, seed,
            ))),
            other => Err(Error::DType {
                op: "dropout",
                expected: "a floating-point tensor (f32 or f64)",
                found: other.dtype(),
            }),
        }
    }

    fn binary(
        &self,
        a: Src<'_, CpuBuffer>,
        b: Src<'_, CpuBuffer>,
        op: BinaryOp,
    ) -> Result<CpuBuffer> {
        ensure_output(op.name(), a.dims(), a.dtype())?;
        let (la, lb) = (a.layout, b.layout);
        Ok(match (a.memory, b.memory) {
            (CpuBuffer::F32(a), CpuBuffer::F32(b)) => {
                CpuBuffer::F32(elementwise::binary(a, la, b, lb, op))
            }
            (CpuBuffer::F64(a), CpuBuffer::F64(b)) => {
                CpuBuffer::F64(elementwise::binary(a, la, b, lb, op))
            }
            (other, _) => {
                return Err(Error::DType {
                    op: op.name(),
                    expected: "a floating-point tensor",
                    found: other.dtype(),
                });
            }
        })
    }

    fn compare(
        &self,
        a: Src<'_, CpuBuffer>,
        b: Src<'_, CpuBuffer>,
        op: CompareOp,
    ) -> Result<CpuBuffer> {
        ensure_output("compare", a.dims(), DType::Bool)?;
        let (la, lb) = (a.layout, b.layout);
        let mask = match (a.memory, b.memory) {
            (CpuBuffer::F32(a), CpuBuffer::F32(b)) => elementwise::compare(a, la, b, lb, op),
            (CpuBuffer::F64(a), CpuBuffer::F64(b)) => elementwise::compare(a, la, b, lb, op),
            (CpuBuffer::I64(a), CpuBuffer::I64(b)) => elementwise::compare(a, la, b, lb, op),
            (CpuBuffer::Bool(a), CpuBuffer::Bool(b)) => elementwise::compare(a, la, b, lb, op),
            (a, b) => return Err(dtype_mismatch("compare", a, b)),
        };
        Ok(CpuBuffer::Bool(mask))
    }

    fn select(
        &self,
        condition: Src<'_, CpuBuffer>,
        on_true: Src<'_, CpuBuffer>,
        on_false: Src<'_, CpuBuffer>,
    ) -> Result<CpuBuffer> {
        ensure_output("where", condition.dims(), on_true.dtype())?;
        let CpuBuffer::Bool(c) = condition.memory else {
            return Err(Error::DType {
                op: "where",
                expected: "a bool condition",
                found: condition.dtype(),
            });
        };
        let c = (c.as_slice(), condition.layout);
        let (lt, lf) = (on_true.layout, on_false.layout);
        Ok(match (on_true.memory, on_false.memory) {
            (CpuBuffer::F32(t), CpuBuffer::F32(f)) => {
                CpuBuffer::F32(elementwise::select(c, (t, lt), (f, lf)))
            }
            (CpuBuffer::F64(t), CpuBuffer::F64(f)) => {
                CpuBuffer::F64(elementwise::select(c, (t, lt), (f, lf)))
            }
            (CpuBuffer::F16(t), CpuBuffer::F16(f)) => {
                CpuBuffer::F16(elementwise::select(c, (t, lt), (f, lf)))
            }
            (CpuBuffer::I64(t), CpuBuffer::I64(f)) => {
                CpuBuffer::I64(elementwise::select(c, (t, lt), (f, lf)))
            }
            (CpuBuffer::Bool(t), CpuBuffer::Bool(f)) => {
                CpuBuffer::Bool(elementwise::select(c, (t, lt), (f, lf)))
            }
            (t, f) => return Err(dtype_mismatch("where", t, f)),
        })
    }

    fn logical_and(&self, a: Src<'_, CpuBuffer>, b: Src<'_, CpuBuffer>) -> Result<CpuBuffer> {
        ensure_output("logical_and", a.dims(), DType::Bool)?;
        match (a.memory, b.memory) {
            (CpuBuffer::Bool(x), CpuBuffer::Bool(y)) => Ok(CpuBuffer::Bool(zip_map(
                x,
                a.layout,
                y,
                b.layout,
                |x, y| x && y,
            ))),
            (CpuBuffer::Bool(_), other) | (other, _) => Err(not_a_mask("logical_and", other)),
        }
    }

    fn logical_not(&self, x: Src<'_, CpuBuffer>) -> Result<CpuBuffer> {
        ensure_output("logical_not", x.dims(), DType::Bool)?;
        match x.memory {
            CpuBuffer::Bool(v) => Ok(CpuBuffer::Bool(map(v, x.layout, |x: bool| !x))),
            other => Err(not_a_mask("logical_not", other)),
        }
    }

    fn cast(&self, x: Src<'_, CpuBuffer>, dtype: DType) -> Result<CpuBuffer> {
        ensure_output("to_dtype", x.dims(), dtype)?;
        fn to<S: Element + Default>(data: &[S], x: Src<'_, CpuBuffer>, dtype: DType) -> CpuBuffer {
            let layout = x.layout;
            match dtype {
                DType::F32 => CpuBuffer::F32(elementwise::convert(data, layout)),
                DType::F64 => CpuBuffer::F64(elementwise::convert(data, layout)),
                DType::F16 => CpuBuffer::F16(elementwise::convert(data, layout)),
                DType::I64 => CpuBuffer::I64(elementwise::convert(data, layout)),
                DType::Bool => CpuBuffer::Bool(elementwise::convert(data, layout)),
            }
        }
        Ok(match x.memory {
            CpuBuffer::F32(v) => to(v, x, dtype),
            CpuBuffer::F64(v) => to(v, x, dtype),
            CpuBuffer::F16(v) => to(v, x, dtype),
            CpuBuffer::I64(v) => to(v, x, dtype),
            CpuBuffer::Bool(v) => to(v, x, dtype),
        })
    }

    fn copy(&self, x: Src<'_, CpuBuffer>) -> Result<CpuBuffer> {
        ensure_output("contiguous", x.dims(), x.dtype())?;
        Ok(map_buffer!(x.memory, |v| map(v, x.layout, |e| e)))
    }
}

fn dtype_mismatch(op: &'static str, a: &CpuBuffer, b: &CpuBuffer) -> Error {
    Error::DTypeMismatch {
        op,
        lhs: a.dtype(),
        rhs: b.dtype(),
    }
}

fn not_a_mask(op: &'static str, found: &CpuBuffer) -> Error {
    Error::DType {
        op,
        expected: "bool masks",
        found: found.dtype(),
    }
}
