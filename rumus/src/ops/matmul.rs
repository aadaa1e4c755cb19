//! Matrix products with PyTorch's `matmul` semantics: 2-D, batched, broadcast batch dims,
//! and 1-D operands treated as a row or a column vector.

use super::BackwardOp;
use super::hooks::{OpCall, apply};
use crate::autograd::Saved;
use crate::dtype::DType;
use crate::error::{Error, Result, ShapeError};
use crate::shape::{Dims, Layout, broadcast_shapes};
use crate::storage::Storage;
use crate::tensor::DynTensor;

impl DynTensor {
    /// Matrix product (`@`). Both operands need rank >= 1; leading (batch) dims broadcast.
    pub fn matmul(&self, rhs: &DynTensor) -> Result<DynTensor> {
        apply(OpCall::MatMul, &[self, rhs], |_| {
            if self.rank() == 0 || rhs.rank() == 0 {
                return Err(ShapeError::Invalid {
                    context: "matmul".into(),
                    message: format!(
                        "both operands need at least one axis, got {:?} and {:?}",
                        self.dims(),
                        rhs.dims()
                    ),
                }
                .into());
            }
            match (self.rank(), rhs.rank()) {
                (1, 1) => self.unsqueeze(0)?.matmul(&rhs.unsqueeze(1)?)?.reshape(&[]),
                (1, _) => self.unsqueeze(0)?.matmul(rhs)?.squeeze(-2),
                (_, 1) => self.matmul(&rhs.unsqueeze(1)?)?.squeeze(-1),
                _ => self.matmul_batched(rhs, None),
            }
        })
    }

    /// `self @ weight^T + bias`, PyTorch's `F.linear`: `self` is `[.., in]`, `weight`
    /// `[out, in]`, `bias` `[out]`; the result is `[.., out]`.
    ///
    /// The bias is added by the product itself (written before the product accumulates onto
    /// it on the CPU, in the kernel's epilogue on a GPU), so the output is written once, and
    /// one record on the tape covers both.
    pub fn linear(&self, weight: &DynTensor, bias: Option<&DynTensor>) -> Result<DynTensor> {
        let operands: Vec<&DynTensor> = [self, weight].into_iter().chain(bias).collect();
        apply(OpCall::Linear, &operands, |_| {
            if weight.rank() != 2 {
                return Err(ShapeError::Invalid {
                    context: "linear".into(),
                    message: format!(
                        "the weight must be [out_features, in_features], got {:?}",
                        weight.dims()
                    ),
                }
                .into());
            }
            let in_features = weight.dims()[1];
            if self.dims().last() != Some(&in_features) {
                return Err(ShapeError::Invalid {
                    context: "linear".into(),
                    message: format!(
                        "the input {:?} has {} features on its last axis, but the weight {:?} ([out_features, in_features]) takes {in_features}; feed [.., {in_features}], or use a weight whose second axis matches the input",
                        self.dims(),
                        self.dims().last().map_or("no".to_string(), ToString::to_string),
                        weight.dims(),
                    ),
                }
                .into());
            }
            let weight_t = weight.transpose(0, 1)?;
            let Some(bias) = bias else {
                return self.matmul(&weight_t);
            };
            let fused = self.rank() >= 2
                && bias.dims() == [weight.dims()[0]]
                && self.dtype() == weight.dtype()
                && bias.dtype() == weight.dtype()
                && matches!(self.dtype(), DType::F32 | DType::F64);
            if fused {
                self.matmul_batched(&weight_t, Some(bias))
            } else {
                // Vectors, other dtypes and broadcasting biases take the two ops (whose
                // errors name the mismatch).
                self.matmul(&weight_t)?.add(bias)
            }
        })
    }

    /// The product of operands of rank 2 or more, plus `bias` along the last axis (its
    /// shape and dtype checked by [`DynTensor::linear`]): the op autocast takes.
    fn matmul_batched(&self, rhs: &DynTensor, bias: Option<&DynTensor>) -> Result<DynTensor> {
        let operands: Vec<&DynTensor> = [self, rhs].into_iter().chain(bias).collect();
        apply(OpCall::Product, &operands, |tape| {
            let half = matches!(self.dtype(), DType::F16 | DType::BF16);
            if half && rhs.dtype() == self.dtype() && !self.device().is_gpu() {
                // On the host, f16 (bf16) products run on the f32 kernel and round once at
                // the end, as PyTorch accumulates them in f32 (they carry no gradients, so
                // nothing records).
                return widening_product(self, rhs, None)?.to_dtype(self.dtype());
            }
            let (la, lb, out_dims) = broadcast_operands(self, rhs)?;
            let out = matmul_untracked((self, &la), (rhs, &lb), bias, &out_dims, false)?;
            Ok(tape.node(out, || match bias {
                None => BackwardOp::Matmul {
                    lhs: Saved::new(self),
                    rhs: Saved::new(rhs),
                },
                Some(bias) => BackwardOp::Linear {
                    input: Saved::new(self),
                    weight_t: Saved::new(rhs),
                    bias_dims: Dims::from_slice(bias.dims()),
                },
            }))
        })
    }
}

/// The layouts of `a` and `b` (rank 2 or more) broadcast to `[batch.., m, k]` and
/// `[batch.., k, n]`, and the product's dims `[batch.., m, n]`.
fn broadcast_operands(a: &DynTensor, b: &DynTensor) -> Result<(Layout, Layout, Vec<usize>)> {
    let (ra, rb) = (a.rank(), b.rank());
    let (m, k) = (a.dims()[ra - 2], a.dims()[ra - 1]);
    let (k2, n) = (b.dims()[rb - 2], b.dims()[rb - 1]);
    if k != k2 {
        return Err(ShapeError::MatmulInner {
            lhs: a.dims().to_vec(),
            rhs: b.dims().to_vec(),
            lhs_inner: k,
            rhs_inner: k2,
        }
        .into());
    }
    let batch = broadcast_shapes(
        &a.dims()[..ra - 2],
        &b.dims()[..rb - 2],
        "matmul (batch dims)",
    )?;
    let with_batch =
        |tail: [usize; 2]| -> Vec<usize> { batch.iter().copied().chain(tail).collect() };
    Ok((
        a.layout().broadcast_to(&with_batch([m, k])),
        b.layout().broadcast_to(&with_batch([k, n])),
        with_batch([m, n]),
    ))
}

/// `a @ b (+ bias)` of `f16` (or `bf16`) operands of rank 2 or more, accumulated in `f32` and
/// returned in `f32` without rounding (autocast's products), plus an `f32` `bias` (`[n]`) on
/// every row. Untracked: the caller records the product.
///
/// On a GPU this is one kernel; on the host the operands are widened and the `f32` kernel
/// runs, which computes the same sums.
pub(crate) fn widening_product(
    a: &DynTensor,
    b: &DynTensor,
    bias: Option<&DynTensor>,
) -> Result<DynTensor> {
    let _untracked = crate::autograd::no_grad();
    if !a.device().is_gpu() {
        // The f32 kernel, not the op: its product must not be autocast again.
        let wide = |t: &DynTensor| t.to_dtype(DType::F32);
        let (a, b) = (wide(a)?, wide(b)?);
        let (la, lb, out_dims) = broadcast_operands(&a, &b)?;
        return matmul_untracked((&a, &la), (&b, &lb), bias, &out_dims, false);
    }
    let (la, lb, out_dims) = broadcast_operands(a, b)?;
    matmul_untracked((a, &la), (b, &lb), bias, &out_dims, true)
}

/// The product of operands already broadcast to `[batch.., m, k]` and `[batch.., k, n]`,
/// plus `bias` (`[n]`, same dtype, or `f32` when widening) on every row. `widen` (`f16` or
/// `bf16` operands on a GPU) returns the sums in `f32`.
fn matmul_untracked(
    (a, la): (&DynTensor, &Layout),
    (b, lb): (&DynTensor, &Layout),
    bias: Option<&DynTensor>,
    out_dims: &[usize],
    widen: bool,
) -> Result<DynTensor> {
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch {
            op: "matmul",
            lhs: a.dtype(),
            rhs: b.dtype(),
        });
    }
    let bias = bias.map(DynTensor::operand);
    let out = Storage::matmul(a.operand_as(la), b.operand_as(lb), bias, out_dims, widen)?;
    Ok(DynTensor::computed(out, out_dims))
}

/// Gradients of `linear`'s input, transposed weight and bias.
pub(crate) fn linear_backward(
    grad: &DynTensor,
    (input, weight_t): (&Saved, &Saved),
    bias_dims: &[usize],
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let mut grads = matmul_backward(grad, input, weight_t, &needs[..2])?;
    grads.push(bias_gradient(grad, bias_dims, needs[2])?);
    Ok(grads)
}

/// The gradient of a bias added along the last axis, when `needed`.
pub(crate) fn bias_gradient(
    grad: &DynTensor,
    bias_dims: &[usize],
    needed: bool,
) -> Result<Option<DynTensor>> {
    needed.then(|| grad.sum_to(bias_dims)).transpose()
}

pub(crate) fn matmul_backward(
    grad: &DynTensor,
    lhs: &Saved,
    rhs: &Saved,
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let (a, b) = (lhs.get("matmul")?, rhs.get("matmul")?);
    product_gradients(grad, (a, b), needs, &|x, y| x.matmul(y))
}

/// Multiplies two matrices (or batches of them) in a backward formula.
pub(crate) type Product<'a> = &'a dyn Fn(&DynTensor, &DynTensor) -> Result<DynTensor>;

/// The gradients of both operands of `a @ b` given `grad`, the output's gradient, each
/// computed by `product` (`matmul`, or for autocast `f16` operands and gradient multiplied
/// into `f32`) and summed over broadcast dims.
pub(crate) fn product_gradients(
    grad: &DynTensor,
    (a, b): (&DynTensor, &DynTensor),
    needs: &[bool],
    product: Product,
) -> Result<Vec<Option<DynTensor>>> {
    let ga = if needs[0] {
        Some(product(grad, &b.transpose(-1, -2)?)?.sum_to(a.dims())?)
    } else {
        None
    };
    let gb = if !needs[1] {
        None
    } else if b.rank() == 2 && a.rank() > 2 {
        // A matrix shared by a batch (a `Linear` weight on `[B, T, D]`): fold the batch into
        // the product's depth, `[B T, K]^T @ [B T, N]`, instead of B products summed after.
        let (k, n) = (a.dims()[a.rank() - 1], grad.dims()[grad.rank() - 1]);
        let rows = a.numel() / k.max(1);
        let a_rows = a.reshape(&[rows, k])?;
        Some(product_in_order_of(
            b,
            &a_rows,
            &grad.reshape(&[rows, n])?,
            product,
        )?)
    } else {
        Some(product_in_order_of(b, a, grad, product)?.sum_to(b.dims())?)
    };
    Ok(vec![ga, gb])
}

fn product_in_order_of(
    b: &DynTensor,
    a: &DynTensor,
    g: &DynTensor,
    product: Product,
) -> Result<DynTensor> {
    if is_transposed_contiguous(b)? {
        product(&g.transpose(-1, -2)?, a)?.transpose(-1, -2)
    } else {
        product(&a.transpose(-1, -2)?, g)
    }
}

/// Whether `t` is the transpose of its last two axes of contiguous memory (a `Linear`
/// weight as the product uses it).
pub(crate) fn is_transposed_contiguous(t: &DynTensor) -> Result<bool> {
    Ok(t.rank() >= 2 && !t.is_contiguous() && t.transpose(-1, -2)?.is_contiguous())
}
