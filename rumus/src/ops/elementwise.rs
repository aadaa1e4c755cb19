//! Binary arithmetic with NumPy broadcasting, comparisons to masks, and `where`.

use std::borrow::Cow;

use super::BackwardOp;
use crate::autograd::{Saved, record};
use crate::backend::cpu::strided::{zip_map, zip3_map};
use crate::dtype::DType;
use crate::element::Float;
use crate::error::{Error, Result};
use crate::shape::{Dims, Layout, broadcast_shapes};
use crate::storage::CpuBuffer;
use crate::tensor::DynTensor;

/// Arithmetic between two tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// `a ^ b`, a floating-point power.
    Pow,
}

impl BinaryOp {
    fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
        }
    }
}

/// Element comparisons; the result is a `bool` tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
}

fn float_binary<T: Float + Default>(
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
    op: BinaryOp,
) -> Vec<T> {
    match op {
        BinaryOp::Add => zip_map(a, la, b, lb, |x, y| x + y),
        BinaryOp::Sub => zip_map(a, la, b, lb, |x, y| x - y),
        BinaryOp::Mul => zip_map(a, la, b, lb, |x, y| x * y),
        BinaryOp::Div => zip_map(a, la, b, lb, |x, y| x / y),
        BinaryOp::Pow => zip_map(a, la, b, lb, |x, y| x.powf(y)),
    }
}

fn compare<T: Copy + PartialOrd + Sync>(
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
    op: CompareOp,
) -> Vec<bool> {
    match op {
        CompareOp::Eq => zip_map(a, la, b, lb, |x, y| x == y),
        CompareOp::Ne => zip_map(a, la, b, lb, |x, y| x != y),
        CompareOp::Lt => zip_map(a, la, b, lb, |x, y| x < y),
        CompareOp::Le => zip_map(a, la, b, lb, |x, y| x <= y),
        CompareOp::Gt => zip_map(a, la, b, lb, |x, y| x > y),
        CompareOp::Ge => zip_map(a, la, b, lb, |x, y| x >= y),
    }
}

/// Reads two tensors' buffers together, taking one lock when they share storage.
///
/// The two locks are taken in one global order (by storage address), not in argument order:
/// std's `RwLock` makes new readers wait behind a waiting writer, so `a.mul(&b)` and
/// `b.mul(&a)` on two threads, with in-place writes to `a` and `b` on two more, would
/// otherwise each hold one read lock and wait for the other forever.
pub(crate) fn read_pair<R>(
    a: &DynTensor,
    b: &DynTensor,
    f: impl FnOnce(&CpuBuffer, &CpuBuffer) -> R,
) -> Result<R> {
    if a.shares_storage_with(b) {
        a.with_buffer(|buffer, _| f(buffer, buffer))
    } else if a.storage().lock_order() < b.storage().lock_order() {
        a.with_buffer(|ba, _| b.with_buffer(|bb, _| f(ba, bb)))?
    } else {
        b.with_buffer(|bb, _| a.with_buffer(|ba, _| f(ba, bb)))?
    }
}

fn same_dtype(op: &'static str, a: &DynTensor, b: &DynTensor) -> Result<DType> {
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            lhs: a.dtype(),
            rhs: b.dtype(),
        });
    }
    Ok(a.dtype())
}

/// Both operands viewed with the broadcast output dims. An operand that has them already
/// (most operands of most ops) lends its own layout instead of a copy.
fn broadcast_pair<'a>(
    op: &'static str,
    a: &'a DynTensor,
    b: &'a DynTensor,
) -> Result<(Dims, Cow<'a, Layout>, Cow<'a, Layout>)> {
    let dims = broadcast_shapes(a.dims(), b.dims(), op)?;
    let view = |t: &'a DynTensor| {
        if t.dims() == dims.as_slice() {
            Cow::Borrowed(t.layout())
        } else {
            Cow::Owned(t.layout().broadcast_to(&dims))
        }
    };
    let (la, lb) = (view(a), view(b));
    Ok((dims, la, lb))
}

/// The result of a binary op on operands already viewed with the output `dims`.
fn binary_untracked(
    (a, la): (&DynTensor, &Layout),
    (b, lb): (&DynTensor, &Layout),
    op: BinaryOp,
    dims: &[usize],
) -> Result<DynTensor> {
    #[cfg(feature = "gpu")]
    if let Some(gpu) = crate::device::gpu_of(op.name(), &[a, b])? {
        return gpu.binary((a, la), (b, lb), op);
    }
    crate::alloc::ensure_output(op.name(), dims, a.dtype().size_in_bytes())?;
    let buffer = read_pair(a, b, |a, b| -> Result<CpuBuffer> {
        Ok(match (a, b) {
            (CpuBuffer::F32(a), CpuBuffer::F32(b)) => {
                CpuBuffer::F32(float_binary(a, la, b, lb, op))
            }
            (CpuBuffer::F64(a), CpuBuffer::F64(b)) => {
                CpuBuffer::F64(float_binary(a, la, b, lb, op))
            }
            (other, _) => {
                return Err(Error::DType {
                    op: op.name(),
                    expected: "a floating-point tensor",
                    found: other.dtype(),
                });
            }
        })
    })??;
    Ok(DynTensor::from_buffer(buffer, dims))
}

/// `condition ? on_true : on_false` with every operand broadcast to `dims` (checked).
fn select_untracked(
    condition: &DynTensor,
    on_true: &DynTensor,
    on_false: &DynTensor,
    dims: &[usize],
) -> Result<DynTensor> {
    #[cfg(feature = "gpu")]
    if let Some(gpu) = crate::device::gpu_of("where", &[condition, on_true, on_false])? {
        return gpu.choose(
            (condition, &condition.layout().broadcast_to(dims)),
            (on_true, &on_true.layout().broadcast_to(dims)),
            (on_false, &on_false.layout().broadcast_to(dims)),
        );
    }
    crate::alloc::ensure_output("where", dims, on_true.dtype().size_in_bytes())?;
    // The mask is copied out so no lock on it is held while the values are read (a bool
    // `masked_fill(&m, ..)` of `m` would otherwise read-lock one storage twice).
    let CpuBuffer::Bool(c) = condition.to_contiguous_buffer()? else {
        unreachable!("checked bool")
    };
    let (lc, lt, lf) = (
        Layout::contiguous(condition.dims()).broadcast_to(dims),
        on_true.layout().broadcast_to(dims),
        on_false.layout().broadcast_to(dims),
    );
    fn select<T: Copy + Sync + Send + Default + 'static>(
        c: (&[bool], &Layout),
        t: (&[T], &Layout),
        f: (&[T], &Layout),
    ) -> Vec<T> {
        // A branch broadcast from one value (relu's gradient against zero, `masked_fill`)
        // joins a two-operand loop as a constant: that loop runs contiguous operands as
        // one vectorised slice, the three-operand one walks rows with index arithmetic.
        let constant =
            |(v, l): (&[T], &Layout)| l.strides().iter().all(|&s| s == 0).then(|| v[l.offset()]);
        match (constant(t), constant(f)) {
            (_, Some(f)) => zip_map(c.0, c.1, t.0, t.1, |c, t| if c { t } else { f }),
            (Some(t), None) => zip_map(c.0, c.1, f.0, f.1, |c, f| if c { t } else { f }),
            (None, None) => zip3_map(c, t, f, |c, t, f| if c { t } else { f }),
        }
    }
    let c = c.as_slice();
    let buffer = read_pair(on_true, on_false, |t, f| match (t, f) {
        (CpuBuffer::F32(t), CpuBuffer::F32(f)) => {
            CpuBuffer::F32(select((c, &lc), (t, &lt), (f, &lf)))
        }
        (CpuBuffer::F64(t), CpuBuffer::F64(f)) => {
            CpuBuffer::F64(select((c, &lc), (t, &lt), (f, &lf)))
        }
        (CpuBuffer::I64(t), CpuBuffer::I64(f)) => {
            CpuBuffer::I64(select((c, &lc), (t, &lt), (f, &lf)))
        }
        (CpuBuffer::Bool(t), CpuBuffer::Bool(f)) => {
            CpuBuffer::Bool(select((c, &lc), (t, &lt), (f, &lf)))
        }
        _ => unreachable!("dtypes checked equal"),
    })?;
    Ok(DynTensor::from_buffer(buffer, dims))
}

impl DynTensor {
    fn binary(&self, rhs: &DynTensor, op: BinaryOp) -> Result<DynTensor> {
        crate::onnx::op(
            || self.binary_untraced(rhs, op),
            |e, out| crate::onnx::onnx_binary(e, op, self, rhs, out),
        )
    }

    fn binary_untraced(&self, rhs: &DynTensor, op: BinaryOp) -> Result<DynTensor> {
        same_dtype(op.name(), self, rhs)?;
        let out = if self.dims() == rhs.dims() {
            // No broadcasting: the operands' own layouts, no shape arithmetic.
            binary_untracked((self, self.layout()), (rhs, rhs.layout()), op, self.dims())?
        } else {
            let (dims, la, lb) = broadcast_pair(op.name(), self, rhs)?;
            binary_untracked((self, &la), (rhs, &lb), op, &dims)?
        };
        Ok(record(out, &[self, rhs], || {
            let (lhs_dims, rhs_dims) =
                (Dims::from_slice(self.dims()), Dims::from_slice(rhs.dims()));
            match op {
                BinaryOp::Add => BackwardOp::Add { lhs_dims, rhs_dims },
                BinaryOp::Sub => BackwardOp::Sub { lhs_dims, rhs_dims },
                BinaryOp::Mul => BackwardOp::Mul {
                    lhs: Saved::new(self),
                    rhs: Saved::new(rhs),
                },
                BinaryOp::Div => BackwardOp::Div {
                    lhs: Saved::new(self),
                    rhs: Saved::new(rhs),
                },
                BinaryOp::Pow => BackwardOp::Pow {
                    base: Saved::new(self),
                    exponent: Saved::new(rhs),
                },
            }
        }))
    }

    /// `self + rhs` with broadcasting.
    pub fn add(&self, rhs: &DynTensor) -> Result<DynTensor> {
        self.binary(rhs, BinaryOp::Add)
    }

    /// `self - rhs` with broadcasting.
    pub fn sub(&self, rhs: &DynTensor) -> Result<DynTensor> {
        self.binary(rhs, BinaryOp::Sub)
    }

    /// `self * rhs` (element-wise) with broadcasting.
    pub fn mul(&self, rhs: &DynTensor) -> Result<DynTensor> {
        self.binary(rhs, BinaryOp::Mul)
    }

    /// `self / rhs` (element-wise) with broadcasting.
    pub fn div(&self, rhs: &DynTensor) -> Result<DynTensor> {
        self.binary(rhs, BinaryOp::Div)
    }

    /// `self ^ exponent` element-wise, both tensors (broadcast).
    pub fn pow(&self, exponent: &DynTensor) -> Result<DynTensor> {
        self.binary(exponent, BinaryOp::Pow)
    }

    /// `scalar - self`.
    pub fn rsub_scalar(&self, scalar: f64) -> Result<DynTensor> {
        self.neg()?.add_scalar(scalar)
    }

    /// `self / scalar`.
    pub fn div_scalar(&self, scalar: f64) -> Result<DynTensor> {
        self.mul_scalar(1.0 / scalar)
    }

    /// `self - scalar`.
    pub fn sub_scalar(&self, scalar: f64) -> Result<DynTensor> {
        self.add_scalar(-scalar)
    }

    /// Element comparison with broadcasting; never tracked (masks have no gradient).
    pub fn compare(&self, rhs: &DynTensor, op: CompareOp) -> Result<DynTensor> {
        crate::onnx::op(
            || self.compare_untraced(rhs, op),
            |e, out| crate::onnx::onnx_compare(e, op, self, rhs, out),
        )
    }

    fn compare_untraced(&self, rhs: &DynTensor, op: CompareOp) -> Result<DynTensor> {
        same_dtype("compare", self, rhs)?;
        let (dims, la, lb) = broadcast_pair("compare", self, rhs)?;
        #[cfg(feature = "gpu")]
        if let Some(gpu) = crate::device::gpu_of("compare", &[self, rhs])? {
            return gpu.compare((self, &la), (rhs, &lb), op);
        }
        crate::alloc::ensure_output("compare", &dims, 1)?;
        let mask = read_pair(self, rhs, |a, b| match (a, b) {
            (CpuBuffer::F32(a), CpuBuffer::F32(b)) => compare(a, &la, b, &lb, op),
            (CpuBuffer::F64(a), CpuBuffer::F64(b)) => compare(a, &la, b, &lb, op),
            (CpuBuffer::I64(a), CpuBuffer::I64(b)) => compare(a, &la, b, &lb, op),
            (CpuBuffer::Bool(a), CpuBuffer::Bool(b)) => compare(a, &la, b, &lb, op),
            _ => unreachable!("dtypes checked equal"),
        })?;
        Ok(DynTensor::from_buffer(CpuBuffer::Bool(mask), &dims))
    }

    /// Compares with a scalar. Integer and bool tensors are compared in `f64`, so `i64 < 0.5`
    /// is not truncated to `i64 < 0`.
    fn compare_scalar(&self, value: f64, op: CompareOp) -> Result<DynTensor> {
        if self.dtype().is_float() {
            return self.compare(&DynTensor::scalar(value, self.dtype())?, op);
        }
        // f64 on the host; the GPU has no f64, so there f32 (exact for integers below 2^24).
        let wide = if self.device().is_gpu() {
            DType::F32
        } else {
            DType::F64
        };
        self.to_dtype(wide)?
            .compare(&DynTensor::scalar(value, wide)?, op)
    }

    /// `self == rhs` as a `bool` mask; same dtypes, broadcast (PyTorch's `torch.eq`).
    pub fn eq(&self, rhs: &DynTensor) -> Result<DynTensor> {
        self.compare(rhs, CompareOp::Eq)
    }
    /// `self != rhs` as a `bool` mask; same dtypes, broadcast (PyTorch's `torch.ne`).
    pub fn ne(&self, rhs: &DynTensor) -> Result<DynTensor> {
        self.compare(rhs, CompareOp::Ne)
    }
    /// `self < rhs` as a `bool` mask; same dtypes, broadcast (PyTorch's `torch.lt`).
    pub fn lt(&self, rhs: &DynTensor) -> Result<DynTensor> {
        self.compare(rhs, CompareOp::Lt)
    }
    /// `self <= rhs` as a `bool` mask; same dtypes, broadcast (PyTorch's `torch.le`).
    pub fn le(&self, rhs: &DynTensor) -> Result<DynTensor> {
        self.compare(rhs, CompareOp::Le)
    }
    /// `self > rhs` as a `bool` mask; same dtypes, broadcast (PyTorch's `torch.gt`).
    pub fn gt(&self, rhs: &DynTensor) -> Result<DynTensor> {
        self.compare(rhs, CompareOp::Gt)
    }
    /// `self >= rhs` as a `bool` mask; same dtypes, broadcast (PyTorch's `torch.ge`).
    pub fn ge(&self, rhs: &DynTensor) -> Result<DynTensor> {
        self.compare(rhs, CompareOp::Ge)
    }
    /// `self == value` as a `bool` mask; integer tensors compare in floating point.
    pub fn eq_scalar(&self, value: f64) -> Result<DynTensor> {
        self.compare_scalar(value, CompareOp::Eq)
    }
    /// `self < value` as a `bool` mask; integer tensors compare in floating point.
    pub fn lt_scalar(&self, value: f64) -> Result<DynTensor> {
        self.compare_scalar(value, CompareOp::Lt)
    }
    /// `self <= value` as a `bool` mask; integer tensors compare in floating point.
    pub fn le_scalar(&self, value: f64) -> Result<DynTensor> {
        self.compare_scalar(value, CompareOp::Le)
    }
    /// `self > value` as a `bool` mask; integer tensors compare in floating point.
    pub fn gt_scalar(&self, value: f64) -> Result<DynTensor> {
        self.compare_scalar(value, CompareOp::Gt)
    }
    /// `self >= value` as a `bool` mask; integer tensors compare in floating point.
    pub fn ge_scalar(&self, value: f64) -> Result<DynTensor> {
        self.compare_scalar(value, CompareOp::Ge)
    }

    /// Picks `on_true` where `condition` (a `bool` tensor) holds and `on_false` elsewhere; all
    /// three broadcast together (PyTorch's `torch.where`).
    pub fn where_(
        condition: &DynTensor,
        on_true: &DynTensor,
        on_false: &DynTensor,
    ) -> Result<DynTensor> {
        crate::onnx::op(
            || Self::where_untraced(condition, on_true, on_false),
            |e, out| crate::onnx::onnx_where(e, condition, on_true, on_false, out),
        )
    }

    fn where_untraced(
        condition: &DynTensor,
        on_true: &DynTensor,
        on_false: &DynTensor,
    ) -> Result<DynTensor> {
        if condition.dtype() != DType::Bool {
            return Err(Error::DType {
                op: "where",
                expected: "a bool condition",
                found: condition.dtype(),
            });
        }
        same_dtype("where", on_true, on_false)?;
        let values = broadcast_shapes(on_true.dims(), on_false.dims(), "where")?;
        let dims = broadcast_shapes(condition.dims(), &values, "where")?;
        let out = select_untracked(condition, on_true, on_false, &dims)?;
        Ok(record(out, &[on_true, on_false], || BackwardOp::Where {
            condition: condition.detach(),
            lhs_dims: Dims::from_slice(on_true.dims()),
            rhs_dims: Dims::from_slice(on_false.dims()),
        }))
    }

    /// Element-wise OR of two `bool` masks (broadcast).
    pub fn logical_or(&self, rhs: &DynTensor) -> Result<DynTensor> {
        // a or b = not (not a and not b)
        self.logical_not()?
            .logical_and(&rhs.logical_not()?)?
            .logical_not()
    }

    /// The larger of the two values at each position (broadcast), as PyTorch's `maximum`: a
    /// NaN on either side gives NaN; the gradient goes to the larger (`self` at a tie).
    pub fn maximum(&self, rhs: &DynTensor) -> Result<DynTensor> {
        self.pick_with(rhs, CompareOp::Ge)
    }

    /// The smaller of the two values at each position (broadcast), as PyTorch's `minimum`,
    /// NaN and ties as in [`maximum`](Self::maximum).
    pub fn minimum(&self, rhs: &DynTensor) -> Result<DynTensor> {
        self.pick_with(rhs, CompareOp::Le)
    }

    /// `self` where `self <op> rhs` holds or `self` is NaN, else `rhs` (NaN there too).
    fn pick_with(&self, rhs: &DynTensor, op: CompareOp) -> Result<DynTensor> {
        let wins = self.compare(rhs, op)?;
        let is_nan = self.ne(self)?;
        DynTensor::where_(&wins.logical_or(&is_nan)?, self, rhs)
    }

    /// Element-wise AND of two `bool` masks (broadcast).
    pub fn logical_and(&self, rhs: &DynTensor) -> Result<DynTensor> {
        crate::onnx::op(
            || self.logical_and_untraced(rhs),
            crate::onnx::onnx_plain("And", &[self, rhs]),
        )
    }

    fn logical_and_untraced(&self, rhs: &DynTensor) -> Result<DynTensor> {
        let (dims, la, lb) = broadcast_pair("logical_and", self, rhs)?;
        #[cfg(feature = "gpu")]
        if let Some(gpu) = crate::device::gpu_of("logical_and", &[self, rhs])? {
            check_mask(self, "logical_and")?;
            check_mask(rhs, "logical_and")?;
            return gpu.logical(&[(self, &la), (rhs, &lb)], 0);
        }
        crate::alloc::ensure_output("logical_and", &dims, 1)?;
        let out = read_pair(self, rhs, |a, b| match (a, b) {
            (CpuBuffer::Bool(a), CpuBuffer::Bool(b)) => Ok(zip_map(a, &la, b, &lb, |x, y| x && y)),
            (CpuBuffer::Bool(_), other) | (other, _) => Err(Error::DType {
                op: "logical_and",
                expected: "bool masks",
                found: other.dtype(),
            }),
        })??;
        Ok(DynTensor::from_buffer(CpuBuffer::Bool(out), &dims))
    }

    /// Element-wise NOT of a `bool` mask.
    pub fn logical_not(&self) -> Result<DynTensor> {
        crate::onnx::op(
            || self.logical_not_untraced(),
            crate::onnx::onnx_plain("Not", &[self]),
        )
    }

    fn logical_not_untraced(&self) -> Result<DynTensor> {
        #[cfg(feature = "gpu")]
        if let Some(gpu) = crate::device::gpu_of("logical_not", &[self])? {
            check_mask(self, "logical_not")?;
            return gpu.logical(&[(self, self.layout()), (self, self.layout())], 2);
        }
        crate::alloc::ensure_output("logical_not", self.dims(), 1)?;
        self.with_buffer(|buffer, layout| match buffer {
            CpuBuffer::Bool(v) => Ok(DynTensor::from_buffer(
                CpuBuffer::Bool(crate::backend::cpu::strided::map(v, layout, |x: bool| !x)),
                self.dims(),
            )),
            other => Err(Error::DType {
                op: "logical_not",
                expected: "a bool mask",
                found: other.dtype(),
            }),
        })?
    }

    /// `value` where `mask` holds, `self` elsewhere.
    pub fn masked_fill(&self, mask: &DynTensor, value: f64) -> Result<DynTensor> {
        crate::onnx::op(
            || self.masked_fill_untraced(mask, value),
            |e, out| crate::onnx::onnx_masked_fill(e, self, mask, value, out),
        )
    }

    fn masked_fill_untraced(&self, mask: &DynTensor, value: f64) -> Result<DynTensor> {
        DynTensor::where_(mask, &DynTensor::scalar(value, self.dtype())?, self)
    }
}

#[cfg(feature = "gpu")]
fn check_mask(t: &DynTensor, op: &'static str) -> Result<()> {
    if t.dtype() != DType::Bool {
        return Err(Error::DType {
            op,
            expected: "bool masks",
            found: t.dtype(),
        });
    }
    Ok(())
}

// ---- backward formulas, written with the same differentiable ops ----

pub(crate) fn add_backward(
    grad: &DynTensor,
    lhs_dims: &[usize],
    rhs_dims: &[usize],
    negate_rhs: bool,
) -> Result<Vec<Option<DynTensor>>> {
    let rhs = grad.sum_to(rhs_dims)?;
    let rhs = if negate_rhs { rhs.neg()? } else { rhs };
    Ok(vec![Some(grad.sum_to(lhs_dims)?), Some(rhs)])
}

pub(crate) fn mul_backward(
    grad: &DynTensor,
    lhs: &Saved,
    rhs: &Saved,
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let (a, b) = (lhs.get("mul")?, rhs.get("mul")?);
    let ga = if needs[0] {
        Some(grad.mul(b)?.sum_to(a.dims())?)
    } else {
        None
    };
    let gb = if needs[1] {
        Some(grad.mul(a)?.sum_to(b.dims())?)
    } else {
        None
    };
    Ok(vec![ga, gb])
}

pub(crate) fn div_backward(
    grad: &DynTensor,
    lhs: &Saved,
    rhs: &Saved,
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let (a, b) = (lhs.get("div")?, rhs.get("div")?);
    let ga = if needs[0] {
        Some(grad.div(b)?.sum_to(a.dims())?)
    } else {
        None
    };
    // d(a/b)/db = -a / b^2
    let gb = if needs[1] {
        Some(grad.mul(a)?.div(&b.mul(b)?)?.neg()?.sum_to(b.dims())?)
    } else {
        None
    };
    Ok(vec![ga, gb])
}

pub(crate) fn pow_backward(
    grad: &DynTensor,
    base: &Saved,
    exponent: &Saved,
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let (a, b) = (base.get("pow")?, exponent.get("pow")?);
    // d(a^b)/da = b * a^(b-1);  d(a^b)/db = a^b * ln(a)
    let ga = if needs[0] {
        Some(
            grad.mul(&b.mul(&a.pow(&b.sub_scalar(1.0)?)?)?)?
                .sum_to(a.dims())?,
        )
    } else {
        None
    };
    // At a == 0, a^b ln(a) is 0 * -inf; its limit (b > 0) is 0, as PyTorch reports.
    let gb = if needs[1] {
        let slope = a
            .pow(b)?
            .mul(&a.log()?)?
            .masked_fill(&a.eq_scalar(0.0)?, 0.0)?;
        Some(grad.mul(&slope)?.sum_to(b.dims())?)
    } else {
        None
    };
    Ok(vec![ga, gb])
}

pub(crate) fn where_backward(
    grad: &DynTensor,
    condition: &DynTensor,
    lhs_dims: &[usize],
    rhs_dims: &[usize],
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let zero = DynTensor::scalar(0.0, grad.dtype())?;
    let gt = if needs[0] {
        Some(DynTensor::where_(condition, grad, &zero)?.sum_to(lhs_dims)?)
    } else {
        None
    };
    let gf = if needs[1] {
        Some(DynTensor::where_(condition, &zero, grad)?.sum_to(rhs_dims)?)
    } else {
        None
    };
    Ok(vec![gt, gf])
}
