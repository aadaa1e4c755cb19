//! Indexing with integer tensors: `index_select`/`index_add` pick whole slices along an
//! axis, `gather`/`scatter_add` pick single elements. Each pair is the other's adjoint, so
//! gradients of gradients stay inside this file.

use super::BackwardOp;
use super::hooks::{OpCall, apply};
use crate::autograd::record;
use crate::error::{Result, ShapeError};
use crate::shape::normalize_axis;
use crate::storage::Storage;
use crate::tensor::DynTensor;

/// Index tensor of `gather`/`scatter_add`: same rank, no axis larger than in `target`
/// except along `axis`.
fn check_gather_dims(
    target: &DynTensor,
    indices: &DynTensor,
    axis: usize,
    op: &'static str,
) -> Result<()> {
    let fits = indices.rank() == target.rank()
        && indices
            .dims()
            .iter()
            .zip(target.dims())
            .enumerate()
            .all(|(a, (&i, &t))| a == axis || i <= t);
    if !fits {
        return Err(ShapeError::Invalid {
            context: op.into(),
            message: format!(
                "index shape {:?} must have the rank of {:?} and no larger size on any axis but {axis}",
                indices.dims(),
                target.dims()
            ),
        }
        .into());
    }
    Ok(())
}

impl DynTensor {
    /// Slices `indices` (a 1-D `i64` tensor) of `axis`, in that order.
    pub fn index_select(&self, axis: isize, indices: &DynTensor) -> Result<DynTensor> {
        apply(OpCall::Gather { axis, indices }, &[self], |tape| {
            let a = normalize_axis(axis, self.rank(), "index_select")?;
            if indices.rank() != 1 {
                return Err(ShapeError::RankMismatch {
                    context: "index_select indices".into(),
                    expected: 1,
                    expected_shape: "[n]".into(),
                    found: indices.rank(),
                    found_shape: indices.dims().to_vec(),
                }
                .into());
            }
            let mut dims = self.dims().to_vec();
            dims[a] = indices.numel();
            let out = Storage::index_select(self.operand(), a, indices.operand())?;
            let out = DynTensor::computed(out, &dims);
            Ok(tape.node(out, || BackwardOp::IndexSelect {
                input_dims: crate::shape::Dims::from_slice(self.dims()),
                axis: a,
                indices: indices.detach(),
            }))
        })
    }

    /// `self` with `source`'s slices added at positions `indices` of `axis` (repeats add up).
    pub fn index_add(
        &self,
        axis: isize,
        indices: &DynTensor,
        source: &DynTensor,
    ) -> Result<DynTensor> {
        let a = normalize_axis(axis, self.rank(), "index_add")?;
        if indices.rank() != 1 {
            return Err(ShapeError::RankMismatch {
                context: "index_add indices".into(),
                expected: 1,
                expected_shape: "[n]".into(),
                found: indices.rank(),
                found_shape: indices.dims().to_vec(),
            }
            .into());
        }
        let mut expected = self.dims().to_vec();
        expected[a] = indices.numel();
        if source.dims() != expected {
            return Err(ShapeError::Invalid {
                context: "index_add".into(),
                message: format!(
                    "source has shape {:?}, expected {expected:?}",
                    source.dims()
                ),
            }
            .into());
        }
        let out = Storage::index_add(self.operand(), a, indices.operand(), source.operand())?;
        let out = DynTensor::computed(out, self.dims());
        Ok(record(out, &[self, source], || BackwardOp::IndexAdd {
            axis: a,
            indices: indices.detach(),
        }))
    }

    /// `out[p] = self[p with its axis coordinate replaced by indices[p]]` (PyTorch `gather`).
    pub fn gather(&self, axis: isize, indices: &DynTensor) -> Result<DynTensor> {
        let a = normalize_axis(axis, self.rank(), "gather")?;
        check_gather_dims(self, indices, a, "gather")?;
        let out = Storage::gather(self.operand(), a, indices.operand())?;
        let out = DynTensor::computed(out, indices.dims());
        Ok(record(out, &[self], || BackwardOp::Gather {
            input_dims: crate::shape::Dims::from_slice(self.dims()),
            axis: a,
            indices: indices.detach(),
        }))
    }

    /// `self` plus `source[p]` added at `p with axis := indices[p]` (PyTorch `scatter_add`).
    pub fn scatter_add(
        &self,
        axis: isize,
        indices: &DynTensor,
        source: &DynTensor,
    ) -> Result<DynTensor> {
        let a = normalize_axis(axis, self.rank(), "scatter_add")?;
        check_gather_dims(self, indices, a, "scatter_add")?;
        if source.dims() != indices.dims() {
            return Err(ShapeError::Invalid {
                context: "scatter_add".into(),
                message: format!(
                    "source shape {:?} differs from index shape {:?}",
                    source.dims(),
                    indices.dims()
                ),
            }
            .into());
        }
        let out = Storage::scatter_add(self.operand(), a, indices.operand(), source.operand())?;
        let out = DynTensor::computed(out, self.dims());
        Ok(record(out, &[self, source], || BackwardOp::ScatterAdd {
            axis: a,
            indices: indices.detach(),
        }))
    }
}

/// An indexed read along an axis, `(tensor, axis, indices)`: `index_select` or `gather`.
pub(crate) type IndexedRead = fn(&DynTensor, isize, &DynTensor) -> Result<DynTensor>;
/// Its adjoint, the indexed add `(tensor, axis, indices, source)`: `index_add` or
/// `scatter_add`.
pub(crate) type IndexedAdd = fn(&DynTensor, isize, &DynTensor, &DynTensor) -> Result<DynTensor>;

/// The gradient of an indexed read (`index_select`, `gather`) of an input of `input_dims`:
/// `grad` added into zeros at the indices it was read from, by the read's adjoint `add`.
pub(crate) fn indexed_read_backward(
    grad: &DynTensor,
    input_dims: &[usize],
    (axis, indices): (usize, &DynTensor),
    add: IndexedAdd,
) -> Result<DynTensor> {
    let zeros = DynTensor::zeros_on(input_dims, grad.dtype(), &grad.device())?;
    add(&zeros, axis as isize, indices, grad)
}

/// The gradients of an indexed add (`index_add`, `scatter_add`) into a tensor: `grad` itself,
/// and (if `needs[1]`) for the added source `grad` read at the indices by the add's adjoint
/// `read`.
pub(crate) fn indexed_add_backward(
    grad: &DynTensor,
    (axis, indices): (usize, &DynTensor),
    needs: &[bool],
    read: IndexedRead,
) -> Result<Vec<Option<DynTensor>>> {
    let source = if needs[1] {
        Some(read(grad, axis as isize, indices)?)
    } else {
        None
    };
    Ok(vec![Some(grad.clone()), source])
}
