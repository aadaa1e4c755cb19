//! Indexing with integer tensors: `index_select`/`index_add` pick whole slices along an
//! axis, `gather`/`scatter_add` pick single elements. Each pair is the other's adjoint, so
//! gradients of gradients stay inside this file.

use crate::autograd::{BackwardOp, record};
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
        crate::onnx::op(
            || self.index_select_untraced(axis, indices),
            |e, out| {
                let axis = normalize_axis(axis, self.rank(), "index_select")?;
                crate::onnx::onnx_gather(e, self, indices, axis, out)
            },
        )
    }

    fn index_select_untraced(&self, axis: isize, indices: &DynTensor) -> Result<DynTensor> {
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
        Ok(record(out, &[self], || BackwardOp::IndexSelect {
            input_dims: crate::shape::Dims::from_slice(self.dims()),
            axis: a,
            indices: indices.detach(),
        }))
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

pub(crate) fn index_select_backward(
    grad: &DynTensor,
    input_dims: &[usize],
    axis: usize,
    indices: &DynTensor,
) -> Result<DynTensor> {
    DynTensor::zeros_on(input_dims, grad.dtype(), &grad.device())?.index_add(
        axis as isize,
        indices,
        grad,
    )
}

pub(crate) fn index_add_backward(
    grad: &DynTensor,
    axis: usize,
    indices: &DynTensor,
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let source = if needs[1] {
        Some(grad.index_select(axis as isize, indices)?)
    } else {
        None
    };
    Ok(vec![Some(grad.clone()), source])
}

pub(crate) fn gather_backward(
    grad: &DynTensor,
    input_dims: &[usize],
    axis: usize,
    indices: &DynTensor,
) -> Result<DynTensor> {
    DynTensor::zeros_on(input_dims, grad.dtype(), &grad.device())?.scatter_add(
        axis as isize,
        indices,
        grad,
    )
}

pub(crate) fn scatter_add_backward(
    grad: &DynTensor,
    axis: usize,
    indices: &DynTensor,
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let source = if needs[1] {
        Some(grad.gather(axis as isize, indices)?)
    } else {
        None
    };
    Ok(vec![Some(grad.clone()), source])
}
