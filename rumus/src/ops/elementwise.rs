//! Binary arithmetic with NumPy broadcasting, comparisons to masks, and `where`.

use std::borrow::Cow;

use super::BackwardOp;
use super::hooks::{OpCall, apply};
use crate::autograd::Saved;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::{Dims, Layout, broadcast_shapes};
use crate::storage::Storage;
use crate::tensor::DynTensor;

pub use crate::backend::kinds::{BinaryOp, CompareOp};

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

/// `a == b`, compared inline: slice equality calls `memcmp`, a visible share of a
/// 16-element op for the two or three sizes compared here.
#[inline]
fn same_dims(a: &[usize], b: &[usize]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
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
    let out = Storage::binary(a.operand_as(la), b.operand_as(lb), op)?;
    Ok(DynTensor::computed(out, dims))
}

/// `condition ? on_true : on_false` with every operand broadcast to `dims` (checked).
fn select_untracked(
    condition: &DynTensor,
    on_true: &DynTensor,
    on_false: &DynTensor,
    dims: &[usize],
) -> Result<DynTensor> {
    let (lc, lt, lf) = (
        condition.layout().broadcast_to(dims),
        on_true.layout().broadcast_to(dims),
        on_false.layout().broadcast_to(dims),
    );
    let out = Storage::select(
        condition.operand_as(&lc),
        on_true.operand_as(&lt),
        on_false.operand_as(&lf),
    )?;
    Ok(DynTensor::computed(out, dims))
}

impl DynTensor {
    fn binary(&self, rhs: &DynTensor, op: BinaryOp) -> Result<DynTensor> {
        apply(OpCall::Binary(op), &[self, rhs], |tape| {
            same_dtype(op.name(), self, rhs)?;
            let out = if same_dims(self.dims(), rhs.dims()) {
                // No broadcasting: the operands' own layouts, no shape arithmetic.
                binary_untracked((self, self.layout()), (rhs, rhs.layout()), op, self.dims())?
            } else {
                let (dims, la, lb) = broadcast_pair(op.name(), self, rhs)?;
                binary_untracked((self, &la), (rhs, &lb), op, &dims)?
            };
            Ok(tape.node(out, || {
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
        })
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
        apply(OpCall::Compare(op), &[self, rhs], |_| {
            same_dtype("compare", self, rhs)?;
            let (dims, la, lb) = broadcast_pair("compare", self, rhs)?;
            let out = Storage::compare(self.operand_as(&la), rhs.operand_as(&lb), op)?;
            Ok(DynTensor::computed(out, &dims))
        })
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
        apply(OpCall::Where { condition }, &[on_true, on_false], |tape| {
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
            Ok(tape.node(out, || BackwardOp::Where {
                condition: condition.detach(),
                lhs_dims: Dims::from_slice(on_true.dims()),
                rhs_dims: Dims::from_slice(on_false.dims()),
            }))
        })
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
        apply(OpCall::And, &[self, rhs], |_| {
            let (dims, la, lb) = broadcast_pair("logical_and", self, rhs)?;
            let out = Storage::logical_and(self.operand_as(&la), rhs.operand_as(&lb))?;
            Ok(DynTensor::computed(out, &dims))
        })
    }

    /// Element-wise NOT of a `bool` mask.
    pub fn logical_not(&self) -> Result<DynTensor> {
        apply(OpCall::Not, &[self], |_| {
            let out = Storage::logical_not(self.operand())?;
            Ok(DynTensor::computed(out, self.dims()))
        })
    }

    /// `value` where `mask` holds, `self` elsewhere.
    pub fn masked_fill(&self, mask: &DynTensor, value: f64) -> Result<DynTensor> {
        apply(OpCall::MaskedFill { value }, &[self, mask], |_| {
            DynTensor::where_(mask, &DynTensor::scalar(value, self.dtype())?, self)
        })
    }
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
