//! Indexing with integer tensors: `index_select`/`index_add` pick whole slices along an
//! axis, `gather`/`scatter_add` pick single elements. Each pair is the other's adjoint, so
//! gradients of gradients stay inside this file.

use super::BackwardOp;
use super::hooks::{OpCall, apply};
use crate::autograd::record;
use crate::backend::cpu::index as kernel;
use crate::dtype::DType;
use crate::error::{Error, Result, ShapeError};
use crate::shape::normalize_axis;
use crate::storage::{CpuBuffer, map_buffer};
use crate::tensor::DynTensor;

fn indices_of(indices: &DynTensor, op: &'static str) -> Result<Vec<i64>> {
    if indices.dtype() != DType::I64 {
        return Err(Error::DType {
            op,
            expected: "an i64 index tensor",
            found: indices.dtype(),
        });
    }
    crate::alloc::ensure_output(op, indices.dims(), 8)?;
    indices.to_vec::<i64>()
}

/// `Some(result of the body)` when the operands are on a GPU, `None` on the CPU.
macro_rules! on_gpu {
    ($op:expr, [$($operand:expr),*], |$gpu:ident| $body:block) => {{
        #[cfg(feature = "gpu")]
        let placed = match crate::device::gpu_of($op, &[$($operand),*]) {
            Err(e) => Some(Err(e)),
            Ok(None) => None,
            Ok(Some($gpu)) => Some((|| -> Result<DynTensor> { $body })()),
        };
        #[cfg(not(feature = "gpu"))]
        let placed: Option<Result<DynTensor>> = None;
        placed
    }};
}

#[cfg(feature = "gpu")]
fn check_index_dtype(indices: &DynTensor, op: &'static str) -> Result<()> {
    if indices.dtype() != DType::I64 {
        return Err(Error::DType {
            op,
            expected: "an i64 index tensor",
            found: indices.dtype(),
        });
    }
    Ok(())
}

fn contiguous_buffer(t: &DynTensor) -> Result<CpuBuffer> {
    t.to_contiguous_buffer()
}

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

/// A float buffer the accumulating kernels can add into, whatever its element type.
trait AddInto {
    fn index_add(&mut self, split: (usize, usize, usize), indices: &[i64]);
    fn scatter_add(&mut self, dims: &[usize], axis: usize, indices: &[i64], index_dims: &[usize]);
}

/// A copy of `dst` with `src` ready to be added into it; both have one float dtype.
struct Accumulation<'a, T> {
    dst: &'a mut [T],
    src: &'a [T],
}

impl<T: crate::element::Float> AddInto for Accumulation<'_, T> {
    fn index_add(&mut self, split: (usize, usize, usize), indices: &[i64]) {
        kernel::index_add(self.dst, split, indices, self.src);
    }
    fn scatter_add(&mut self, dims: &[usize], axis: usize, indices: &[i64], index_dims: &[usize]) {
        kernel::scatter_add(self.dst, dims, axis, indices, index_dims, self.src);
    }
}

/// Copies `base`, lets `add` accumulate `source` into the copy, and returns it.
fn add_into_copy(
    base: &DynTensor,
    source: &DynTensor,
    op: &'static str,
    add: impl FnOnce(&mut dyn AddInto),
) -> Result<CpuBuffer> {
    match (contiguous_buffer(base)?, contiguous_buffer(source)?) {
        (CpuBuffer::F32(mut dst), CpuBuffer::F32(src)) => {
            add(&mut Accumulation {
                dst: &mut dst,
                src: &src,
            });
            Ok(CpuBuffer::F32(dst))
        }
        (CpuBuffer::F64(mut dst), CpuBuffer::F64(src)) => {
            add(&mut Accumulation {
                dst: &mut dst,
                src: &src,
            });
            Ok(CpuBuffer::F64(dst))
        }
        (dst, src) if dst.dtype() == src.dtype() => Err(Error::DType {
            op,
            expected: "a floating-point tensor",
            found: dst.dtype(),
        }),
        (dst, src) => Err(Error::DTypeMismatch {
            op,
            lhs: dst.dtype(),
            rhs: src.dtype(),
        }),
    }
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
            let out = match on_gpu!("index_select", [self, indices], |gpu| {
                check_index_dtype(indices, "index_select")?;
                gpu.index_select(self, a, indices)
            }) {
                Some(out) => out?,
                None => {
                    let idx = indices_of(indices, "index_select")?;
                    kernel::check_indices(&idx, self.dims()[a], a, "index_select")?;
                    let mut dims = self.dims().to_vec();
                    dims[a] = idx.len();
                    let element = self.dtype().size_in_bytes();
                    crate::alloc::ensure_output("index_select", self.dims(), element)?;
                    crate::alloc::ensure_output("index_select", &dims, element)?;
                    let split = kernel::split_at_axis(self.dims(), a);
                    let buffer = map_buffer!(contiguous_buffer(self)?, |v| kernel::index_select(
                        &v, split, &idx
                    ));
                    DynTensor::from_buffer(buffer, &dims)
                }
            };
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
        let out = match on_gpu!("index_add", [self, indices, source], |gpu| {
            check_index_dtype(indices, "index_add")?;
            gpu.index_add(self, a, indices, source)
        }) {
            Some(out) => out?,
            None => {
                let idx = indices_of(indices, "index_add")?;
                kernel::check_indices(&idx, self.dims()[a], a, "index_add")?;
                let split = kernel::split_at_axis(self.dims(), a);
                let buffer = add_into_copy(self, source, "index_add", |dst: &mut dyn AddInto| {
                    dst.index_add(split, &idx)
                })?;
                DynTensor::from_buffer(buffer, self.dims())
            }
        };
        Ok(record(out, &[self, source], || BackwardOp::IndexAdd {
            axis: a,
            indices: indices.detach(),
        }))
    }

    /// `out[p] = self[p with its axis coordinate replaced by indices[p]]` (PyTorch `gather`).
    pub fn gather(&self, axis: isize, indices: &DynTensor) -> Result<DynTensor> {
        let a = normalize_axis(axis, self.rank(), "gather")?;
        check_gather_dims(self, indices, a, "gather")?;
        let out = match on_gpu!("gather", [self, indices], |gpu| {
            check_index_dtype(indices, "gather")?;
            gpu.gather(self, a, indices)
        }) {
            Some(out) => out?,
            None => {
                let idx = indices_of(indices, "gather")?;
                kernel::check_indices(&idx, self.dims()[a], a, "gather")?;
                let (dims, index_dims) = (self.dims(), indices.dims());
                let element = self.dtype().size_in_bytes();
                crate::alloc::ensure_output("gather", dims, element)?;
                crate::alloc::ensure_output("gather", index_dims, element)?;
                let buffer = map_buffer!(contiguous_buffer(self)?, |v| kernel::gather(
                    &v, dims, a, &idx, index_dims
                ));
                DynTensor::from_buffer(buffer, index_dims)
            }
        };
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
        let out = match on_gpu!("scatter_add", [self, indices, source], |gpu| {
            check_index_dtype(indices, "scatter_add")?;
            gpu.scatter_add(self, a, indices, source)
        }) {
            Some(out) => out?,
            None => {
                let idx = indices_of(indices, "scatter_add")?;
                kernel::check_indices(&idx, self.dims()[a], a, "scatter_add")?;
                let (dims, index_dims) = (self.dims(), indices.dims());
                let buffer =
                    add_into_copy(self, source, "scatter_add", |dst: &mut dyn AddInto| {
                        dst.scatter_add(dims, a, &idx, index_dims)
                    })?;
                DynTensor::from_buffer(buffer, dims)
            }
        };
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
