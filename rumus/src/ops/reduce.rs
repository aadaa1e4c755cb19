//! Reductions over axes: sum, mean, max/min, argmax/argmin, and the statistics built from
//! them (variance, standard deviation, log-sum-exp).

use super::BackwardOp;
use super::hooks::{OpCall, apply};
use crate::autograd::Saved;
use crate::backend::kinds::Reduction;
use crate::error::{Result, ShapeError};
use crate::shape::{broadcast_shapes, normalize_axes, normalize_axis};
use crate::storage::Storage;
use crate::tensor::DynTensor;

/// Dims after reducing `axes` (sorted): kept as 1 with `keepdim`, removed otherwise.
fn reduced_dims(dims: &[usize], axes: &[usize], keepdim: bool) -> Vec<usize> {
    dims.iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&i), keepdim) {
            (false, _) => Some(d),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect()
}

impl DynTensor {
    fn reduce_raw(
        &self,
        axes: &[usize],
        keepdim: bool,
        kind: Reduction,
        op: &'static str,
    ) -> Result<DynTensor> {
        debug_assert_eq!(op, kind.name());
        let out = Storage::reduce(self.operand(), axes, kind)?;
        Ok(DynTensor::computed(
            out,
            &reduced_dims(self.dims(), axes, keepdim),
        ))
    }

    /// Sum over `axes` (negative axes count from the end). An empty list sums nothing.
    pub fn sum(&self, axes: &[isize], keepdim: bool) -> Result<DynTensor> {
        apply(
            OpCall::Reduce {
                axes,
                keepdim,
                mean: false,
            },
            &[self],
            |tape| {
                let axes = normalize_axes(axes, self.rank(), "sum")?;
                let out = self.reduce_raw(&axes, keepdim, Reduction::Sum, "sum")?;
                Ok(tape.node(out, || BackwardOp::Sum {
                    input_dims: crate::shape::Dims::from_slice(self.dims()),
                    axes,
                    keepdim,
                }))
            },
        )
    }

    /// Sum of every element, as a rank-0 tensor.
    pub fn sum_all(&self) -> Result<DynTensor> {
        self.sum(&all_axes(self.rank()), false)
    }

    /// Mean over `axes`.
    pub fn mean(&self, axes: &[isize], keepdim: bool) -> Result<DynTensor> {
        apply(
            OpCall::Reduce {
                axes,
                keepdim,
                mean: true,
            },
            &[self],
            |_| {
                let count = reduced_count(self.dims(), axes, "mean")?;
                self.sum(axes, keepdim)?.mul_scalar(1.0 / count)
            },
        )
    }

    /// Mean of every element.
    pub fn mean_all(&self) -> Result<DynTensor> {
        self.mean(&all_axes(self.rank()), false)
    }

    fn extremum(&self, axes: &[isize], keepdim: bool, max: bool) -> Result<DynTensor> {
        apply(OpCall::Extremum { axes, keepdim, max }, &[self], |tape| {
            let op = if max { "max" } else { "min" };
            let axes = normalize_axes(axes, self.rank(), op)?;
            reject_empty_axes(self.dims(), &axes, op)?;
            let kind = if max { Reduction::Max } else { Reduction::Min };
            let out = self.reduce_raw(&axes, keepdim, kind, op)?;
            Ok(tape.node(out, || BackwardOp::Extremum {
                input: Saved::new(self),
                axes,
                keepdim,
                max,
            }))
        })
    }

    /// Largest value over `axes`. With ties, the gradient is shared equally among them.
    pub fn max(&self, axes: &[isize], keepdim: bool) -> Result<DynTensor> {
        self.extremum(axes, keepdim, true)
    }

    /// Smallest value over `axes`.
    pub fn min(&self, axes: &[isize], keepdim: bool) -> Result<DynTensor> {
        self.extremum(axes, keepdim, false)
    }

    fn arg_extremum(&self, axis: isize, keepdim: bool, max: bool) -> Result<DynTensor> {
        apply(OpCall::ArgExtremum { axis, keepdim, max }, &[self], |_| {
            let op = if max { "argmax" } else { "argmin" };
            let axis = normalize_axis(axis, self.rank(), op)?;
            reject_empty_axes(self.dims(), &[axis], op)?;
            let out = Storage::arg_reduce(self.operand(), axis, max)?;
            Ok(DynTensor::computed(
                out,
                &reduced_dims(self.dims(), &[axis], keepdim),
            ))
        })
    }

    /// Index (`i64`) of the largest value along `axis`; the first one wins ties.
    pub fn argmax(&self, axis: isize, keepdim: bool) -> Result<DynTensor> {
        self.arg_extremum(axis, keepdim, true)
    }

    /// Index (`i64`) of the smallest value along `axis`.
    pub fn argmin(&self, axis: isize, keepdim: bool) -> Result<DynTensor> {
        self.arg_extremum(axis, keepdim, false)
    }

    /// Variance over `axes` with `correction` subtracted from the count (1 = unbiased, as
    /// PyTorch's default).
    pub fn var(&self, axes: &[isize], correction: usize, keepdim: bool) -> Result<DynTensor> {
        let count = reduced_count(self.dims(), axes, "var")?;
        let centered = self.sub(&self.mean(axes, true)?)?;
        let dof = (count - correction as f64).max(0.0);
        centered
            .mul(&centered)?
            .sum(axes, keepdim)?
            .mul_scalar(1.0 / dof)
    }

    /// Standard deviation over `axes` (see [`DynTensor::var`]).
    pub fn std(&self, axes: &[isize], correction: usize, keepdim: bool) -> Result<DynTensor> {
        self.var(axes, correction, keepdim)?.sqrt()
    }

    /// `log(sum(exp(x)))` over `axes`, computed without overflow.
    pub fn logsumexp(&self, axes: &[isize], keepdim: bool) -> Result<DynTensor> {
        let shift = self.max(axes, true)?.detach();
        // An all -inf (or +inf) group would give inf - inf; shift such groups by zero instead.
        let finite = shift.abs()?.lt_scalar(f64::INFINITY)?;
        let shift = shift.masked_fill(&finite.logical_not()?, 0.0)?;
        let total = self
            .sub(&shift)?
            .exp()?
            .sum(axes, true)?
            .log()?
            .add(&shift)?;
        if keepdim {
            Ok(total)
        } else {
            let normalized = normalize_axes(axes, self.rank(), "logsumexp")?;
            total.reshape(&reduced_dims(self.dims(), &normalized, false))
        }
    }

    /// Sums a (broadcast) gradient back to `dims`: the adjoint of broadcasting.
    pub fn sum_to(&self, dims: &[usize]) -> Result<DynTensor> {
        if self.dims() == dims {
            return Ok(self.clone());
        }
        let context = format!("sum_to {dims:?} from {:?}", self.dims());
        if dims.len() > self.rank()
            || broadcast_shapes(dims, self.dims(), &context)?.as_slice() != self.dims()
        {
            return Err(ShapeError::Invalid {
                context,
                message: "the target must broadcast to the tensor's shape".into(),
            }
            .into());
        }
        let extra = self.rank() - dims.len();
        let axes: Vec<isize> = (0..self.rank())
            .filter(|&i| i < extra || (dims[i - extra] == 1 && self.dims()[i] != 1))
            .map(|i| i as isize)
            .collect();
        self.sum(&axes, true)?.reshape(dims)
    }
}

/// How many elements each output of a reduction over `axes` of `dims` combines, as a float:
/// the reduced axes of an empty tensor may multiply past `usize` ([0, 2^40, 2^40] over its
/// last two), and the count only ever divides.
fn reduced_count(dims: &[usize], axes: &[isize], op: &str) -> Result<f64> {
    let axes = normalize_axes(axes, dims.len(), op)?;
    Ok(axes.iter().map(|&a| dims[a] as f64).product())
}

/// Extrema of zero elements do not exist (PyTorch raises too).
fn reject_empty_axes(dims: &[usize], axes: &[usize], op: &'static str) -> Result<()> {
    match axes.iter().find(|&&a| dims[a] == 0) {
        Some(&axis) => Err(ShapeError::Invalid {
            context: format!("{op} over {dims:?}"),
            message: format!("axis {axis} is empty, so there is no {op}"),
        }
        .into()),
        None => Ok(()),
    }
}

pub(crate) fn all_axes(rank: usize) -> Vec<isize> {
    (0..rank as isize).collect()
}

pub(crate) fn sum_backward(
    grad: &DynTensor,
    input_dims: &[usize],
    axes: &[usize],
    keepdim: bool,
) -> Result<DynTensor> {
    let grad = if keepdim {
        grad.clone()
    } else {
        grad.reshape(&reduced_dims(input_dims, axes, true))?
    };
    grad.broadcast_to(input_dims)
}

pub(crate) fn extremum_backward(
    grad: &DynTensor,
    input: &Saved,
    axes: &[usize],
    keepdim: bool,
    max: bool,
) -> Result<DynTensor> {
    let x = input.get(if max { "max" } else { "min" })?;
    let axes_i: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
    let best = if max {
        x.max(&axes_i, true)?
    } else {
        x.min(&axes_i, true)?
    };
    let hits = x.eq(&best.detach())?;
    let count = hits.to_dtype(x.dtype())?.sum(&axes_i, true)?;
    let share = sum_backward(grad, x.dims(), axes, keepdim)?.div(&count)?;
    DynTensor::where_(&hits, &share, &DynTensor::scalar(0.0, x.dtype())?)
}
