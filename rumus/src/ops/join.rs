//! Joining and splitting: `cat`, `stack`, `split`, `chunk`. Splits are narrow views, so
//! their gradients flow through the view records.

use super::BackwardOp;
use super::hooks::{OpCall, apply};
use crate::error::{Error, Result, ShapeError};
use crate::shape::normalize_axis;
use crate::storage::Storage;
use crate::tensor::DynTensor;

impl DynTensor {
    /// Joins tensors along `axis`; all other dims and the dtype must agree.
    pub fn cat(tensors: &[&DynTensor], axis: isize) -> Result<DynTensor> {
        apply(OpCall::Concat { axis }, tensors, |tape| {
            let first = tensors.first().ok_or_else(|| Error::InvalidArgument {
                op: "cat",
                message: "needs at least one tensor".into(),
            })?;
            let a = normalize_axis(axis, first.rank(), "cat")?;
            for (i, t) in tensors.iter().enumerate().skip(1) {
                if t.dtype() != first.dtype() {
                    return Err(Error::DTypeMismatch {
                        op: "cat",
                        lhs: first.dtype(),
                        rhs: t.dtype(),
                    });
                }
                let same_rank = t.rank() == first.rank();
                if let Some(bad) = (0..first.rank())
                    .find(|&d| d != a && (!same_rank || t.dims()[d] != first.dims()[d]))
                {
                    return Err(ShapeError::Invalid {
                        context: "cat".into(),
                        message: format!("tensor {i} has shape {:?} but tensor 0 has {:?}; they must agree on every axis except {a} (first difference: axis {bad})", t.dims(), first.dims()),
                    }
                    .into());
                }
                if !same_rank {
                    return Err(ShapeError::RankMismatch {
                        context: format!("cat tensor {i}"),
                        expected: first.rank(),
                        expected_shape: format!("{:?}", first.dims()),
                        found: t.rank(),
                        found_shape: t.dims().to_vec(),
                    }
                    .into());
                }
            }
            let lens: Vec<usize> = tensors.iter().map(|t| t.dims()[a]).collect();
            let mut dims = first.dims().to_vec();
            dims[a] = lens
                .iter()
                .try_fold(0usize, |total, &len| total.checked_add(len))
                .ok_or_else(|| ShapeError::Invalid {
                    context: "cat".into(),
                    message: format!("the joined axis {a} would be longer than fits in memory"),
                })?;
            let out = cat_untracked(tensors, a, &dims)?;
            Ok(tape.node(out, || BackwardOp::Cat {
                axis: a,
                sizes: lens,
            }))
        })
    }

    /// Joins same-shaped tensors along a new axis.
    pub fn stack(tensors: &[&DynTensor], axis: isize) -> Result<DynTensor> {
        let first = tensors.first().ok_or_else(|| Error::InvalidArgument {
            op: "stack",
            message: "needs at least one tensor".into(),
        })?;
        if let Some((i, t)) = tensors
            .iter()
            .enumerate()
            .find(|(_, t)| t.dims() != first.dims())
        {
            return Err(ShapeError::Invalid {
                context: "stack".into(),
                message: format!(
                    "tensor {i} has shape {:?} but tensor 0 has {:?}",
                    t.dims(),
                    first.dims()
                ),
            }
            .into());
        }
        let expanded = tensors
            .iter()
            .map(|t| t.unsqueeze(axis))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&DynTensor> = expanded.iter().collect();
        DynTensor::cat(&refs, axis)
    }

    /// Pieces of `size` entries along `axis` (the last may be shorter).
    pub fn split(&self, size: usize, axis: isize) -> Result<Vec<DynTensor>> {
        if size == 0 {
            return Err(Error::InvalidArgument {
                op: "split",
                message: "split size must be positive".into(),
            });
        }
        let a = normalize_axis(axis, self.rank(), "split")?;
        let total = self.dims()[a];
        if total == 0 {
            // Like PyTorch: an empty axis splits into one empty piece.
            return Ok(vec![self.narrow(a as isize, 0, 0)?]);
        }
        (0..total)
            .step_by(size)
            .map(|start| self.narrow(a as isize, start, size.min(total - start)))
            .collect()
    }

    /// `chunks` nearly equal pieces along `axis` (PyTorch's `chunk`: pieces of ceil(n/chunks)).
    pub fn chunk(&self, chunks: usize, axis: isize) -> Result<Vec<DynTensor>> {
        if chunks == 0 {
            return Err(Error::InvalidArgument {
                op: "chunk",
                message: "number of chunks must be positive".into(),
            });
        }
        let total = self.dims()[normalize_axis(axis, self.rank(), "chunk")?];
        self.split(total.div_ceil(chunks).max(1), axis)
    }
}

pub(crate) fn cat_backward(
    grad: &DynTensor,
    axis: usize,
    sizes: &[usize],
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let mut start = 0;
    sizes
        .iter()
        .zip(needs)
        .map(|(&len, &need)| {
            let piece = if need {
                Some(grad.narrow(axis as isize, start, len)?)
            } else {
                None
            };
            start += len;
            Ok(piece)
        })
        .collect()
}

/// The concatenation of `tensors` (checked) along `a` into a new tensor of `dims`.
fn cat_untracked(tensors: &[&DynTensor], a: usize, dims: &[usize]) -> Result<DynTensor> {
    let parts: Vec<_> = tensors.iter().map(|t| t.operand()).collect();
    let out = Storage::cat(&parts, a, dims)?;
    Ok(DynTensor::computed(out, dims))
}
