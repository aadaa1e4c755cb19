//! Views: ops that re-describe the same memory (reshape, permute, expand, narrow). Each
//! still records onto the graph, so a gradient always flows back through a view.

use super::BackwardOp;
use super::hooks::{OpCall, apply};
use crate::error::{Result, ShapeError};
use crate::shape::{broadcast_shapes, normalize_axis};
use crate::storage::{CpuBuffer, Storage};
use crate::tensor::DynTensor;

impl DynTensor {
    /// A fresh row-major copy of exactly this view's elements.
    pub(crate) fn to_contiguous_buffer(&self) -> Result<CpuBuffer> {
        self.storage().host_copy(self.layout())
    }

    /// A contiguous version of this view, not recorded (callers record what they need).
    pub(crate) fn contiguous_untracked(&self) -> Result<DynTensor> {
        if self.is_contiguous() {
            return Ok(self.detach());
        }
        let out = Storage::copy(self.operand())?;
        Ok(DynTensor::computed(out, self.dims()))
    }

    /// The same values in row-major memory; returns `self` when it already is.
    pub fn contiguous(&self) -> Result<DynTensor> {
        apply(OpCall::Contiguous, &[self], |tape| {
            if self.is_contiguous() {
                return Ok(self.clone());
            }
            Ok(tape.node(self.contiguous_untracked()?, || BackwardOp::Contiguous))
        })
    }

    /// The same elements with new dims (a view when the tensor is contiguous, a copy
    /// otherwise). The element count must not change.
    pub fn reshape(&self, dims: &[usize]) -> Result<DynTensor> {
        apply(OpCall::Reshape, &[self], |tape| {
            let numel = crate::shape::checked_numel(dims, "reshape")?;
            if numel != self.numel() {
                return Err(ShapeError::ElementCount {
                    context: format!("reshape of {:?}", self.dims()),
                    shape: dims.to_vec(),
                    expected: numel,
                    found: self.numel(),
                }
                .into());
            }
            if dims == self.dims() {
                return Ok(self.clone());
            }
            let source = self.contiguous_untracked()?;
            let out = source.view_with(source.layout().reshaped(dims));
            Ok(tape.node(out, || BackwardOp::Reshape {
                input_dims: crate::shape::Dims::from_slice(self.dims()),
            }))
        })
    }

    /// Reshape where one entry may be `-1`, inferred from the element count.
    pub fn reshape_infer(&self, dims: &[isize]) -> Result<DynTensor> {
        let invalid = |message: String| ShapeError::Invalid {
            context: format!("reshape of {:?} to {dims:?}", self.dims()),
            message,
        };
        let inferred: Vec<usize> = dims
            .iter()
            .enumerate()
            .filter(|(_, d)| **d == -1)
            .map(|(i, _)| i)
            .collect();
        if inferred.len() > 1 || dims.iter().any(|&d| d < -1) {
            return Err(invalid("use non-negative sizes and at most one -1".into()).into());
        }
        let given: Vec<usize> = dims
            .iter()
            .filter(|&&d| d >= 0)
            .map(|&d| d as usize)
            .collect();
        let known = crate::shape::checked_numel(&given, "reshape")?;
        let mut out: Vec<usize> = dims.iter().map(|&d| d.max(0) as usize).collect();
        if let Some(&slot) = inferred.first() {
            if known == 0 || !self.numel().is_multiple_of(known) {
                return Err(invalid(format!(
                    "{} elements cannot be split into groups of {known}",
                    self.numel()
                ))
                .into());
            }
            out[slot] = self.numel() / known;
        }
        self.reshape(&out)
    }

    /// Merges axes `start..=end` into one.
    pub fn flatten(&self, start: isize, end: isize) -> Result<DynTensor> {
        if self.rank() == 0 {
            return self.reshape(&[1]);
        }
        let (s, e) = (
            normalize_axis(start, self.rank(), "flatten")?,
            normalize_axis(end, self.rank(), "flatten")?,
        );
        if s > e {
            return Err(ShapeError::Invalid {
                context: "flatten".into(),
                message: format!("start axis {s} comes after end axis {e}"),
            }
            .into());
        }
        let d = self.dims();
        let merged = crate::shape::checked_numel(&d[s..=e], "flatten")?;
        let dims: Vec<usize> = d[..s]
            .iter()
            .copied()
            .chain([merged])
            .chain(d[e + 1..].iter().copied())
            .collect();
        self.reshape(&dims)
    }

    /// Removes `axis`, which must have size 1.
    pub fn squeeze(&self, axis: isize) -> Result<DynTensor> {
        let a = normalize_axis(axis, self.rank(), "squeeze")?;
        if self.dims()[a] != 1 {
            return Err(ShapeError::AxisMismatch {
                context: format!("squeeze of {:?}", self.dims()),
                axis: a,
                expected: 1,
                found: self.dims()[a],
            }
            .into());
        }
        let mut dims = self.dims().to_vec();
        dims.remove(a);
        self.reshape(&dims)
    }

    /// Inserts a size-1 axis at `axis` (`-1` appends).
    pub fn unsqueeze(&self, axis: isize) -> Result<DynTensor> {
        let a = normalize_axis(axis, self.rank() + 1, "unsqueeze")?;
        let mut dims = self.dims().to_vec();
        dims.insert(a, 1);
        self.reshape(&dims)
    }

    /// Reorders axes: axis `i` of the result is axis `perm[i]` of `self`.
    pub fn permute(&self, perm: &[usize]) -> Result<DynTensor> {
        apply(OpCall::Permute { perm }, &[self], |tape| {
            let mut seen = vec![false; self.rank()];
            let valid = perm.len() == self.rank()
                && perm
                    .iter()
                    .all(|&p| p < self.rank() && !std::mem::replace(&mut seen[p], true));
            if !valid {
                return Err(ShapeError::Invalid {
                    context: format!("permute of {:?}", self.dims()),
                    message: format!("{perm:?} is not a permutation of 0..{}", self.rank()),
                }
                .into());
            }
            let out = self.view_with(self.layout().permute(perm));
            Ok(tape.node(out, || BackwardOp::Permute {
                perm: perm.to_vec(),
            }))
        })
    }

    /// Swaps two axes.
    pub fn transpose(&self, a: isize, b: isize) -> Result<DynTensor> {
        let (a, b) = (
            normalize_axis(a, self.rank(), "transpose")?,
            normalize_axis(b, self.rank(), "transpose")?,
        );
        let mut perm: Vec<usize> = (0..self.rank()).collect();
        perm.swap(a, b);
        self.permute(&perm)
    }

    /// Broadcasts to `dims` without copying (PyTorch's `expand` / `broadcast_to`).
    pub fn broadcast_to(&self, dims: &[usize]) -> Result<DynTensor> {
        apply(OpCall::Expand, &[self], |tape| {
            let context = format!("broadcast_to {dims:?}");
            crate::shape::checked_numel(dims, &context)?;
            if dims.len() < self.rank()
                || broadcast_shapes(self.dims(), dims, &context)?.as_slice() != dims
            {
                return Err(ShapeError::Invalid {
                    context,
                    message: format!("{:?} does not broadcast to {dims:?}", self.dims()),
                }
                .into());
            }
            if dims == self.dims() {
                return Ok(self.clone());
            }
            let out = self.view_with(self.layout().broadcast_to(dims));
            Ok(tape.node(out, || BackwardOp::Expand {
                input_dims: crate::shape::Dims::from_slice(self.dims()),
            }))
        })
    }

    /// `len` entries of `axis` starting at `start`, sharing memory with `self`.
    pub fn narrow(&self, axis: isize, start: usize, len: usize) -> Result<DynTensor> {
        apply(OpCall::Narrow { axis, start, len }, &[self], |tape| {
            let a = normalize_axis(axis, self.rank(), "narrow")?;
            let size = self.dims()[a];
            if start.checked_add(len).is_none_or(|end| end > size) {
                return Err(ShapeError::Invalid {
                    context: format!("narrow of {:?} along axis {a}", self.dims()),
                    message: format!(
                        "range {start}..{} exceeds the axis size {size}",
                        start.saturating_add(len)
                    ),
                }
                .into());
            }
            let out = self.view_with(self.layout().narrow(a, start, len));
            Ok(tape.node(out, || BackwardOp::Narrow {
                input_dims: crate::shape::Dims::from_slice(self.dims()),
                axis: a,
                start,
            }))
        })
    }

    /// Entries `range` of `axis` (like `x[:, 2..5]`).
    pub fn slice(&self, axis: isize, range: std::ops::Range<usize>) -> Result<DynTensor> {
        self.narrow(axis, range.start, range.end.saturating_sub(range.start))
    }
}

pub(crate) fn inverse_permutation(perm: &[usize]) -> Vec<usize> {
    let mut inverse = vec![0; perm.len()];
    for (i, &p) in perm.iter().enumerate() {
        inverse[p] = i;
    }
    inverse
}

/// Gradient of `narrow`: the slice's gradient placed back with zeros around it.
pub(crate) fn narrow_backward(
    grad: &DynTensor,
    input_dims: &[usize],
    axis: usize,
    start: usize,
) -> Result<DynTensor> {
    let len = grad.dims()[axis];
    let after = input_dims[axis] - start - len;
    let zeros_of = |size: usize| {
        let mut dims = input_dims.to_vec();
        dims[axis] = size;
        DynTensor::zeros_on(&dims, grad.dtype(), &grad.device())
    };
    let parts = [zeros_of(start)?, grad.clone(), zeros_of(after)?];
    DynTensor::cat(&[&parts[0], &parts[1], &parts[2]], axis as isize)
}
