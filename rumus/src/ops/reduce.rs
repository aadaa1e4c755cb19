//! Reductions over axes: sum, mean, max/min, argmax/argmin, and the statistics built from
//! them (variance, standard deviation, log-sum-exp).

use super::BackwardOp;
use crate::autograd::{Saved, record};
use crate::backend::cpu::reduce::{Reduction, arg_extremum, reduce};
use crate::element::Element;
use crate::error::{Result, ShapeError};
use crate::shape::{broadcast_shapes, normalize_axes, normalize_axis};
use crate::storage::CpuBuffer;
use crate::tensor::{DynTensor, with_float};

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
        #[cfg(feature = "gpu")]
        if let Some(gpu) = crate::device::gpu_of(op, &[self])? {
            return gpu.reduce(self, axes, kind, &reduced_dims(self.dims(), axes, keepdim));
        }
        // The sum over the empty axis of [0, 2^62] is 2^62 zeros.
        let out_dims = reduced_dims(self.dims(), axes, keepdim);
        let element_bytes = self.dtype().size_in_bytes();
        crate::alloc::ensure_output(op, &out_dims, element_bytes)?;
        if self.numel() == 0 && self.dtype().is_float() {
            // Only sums reach here with elements to produce (extrema of empty axes are
            // refused first), and the groups' sizes may overflow even though none exists.
            return DynTensor::zeros(&out_dims, self.dtype());
        }
        if !self.is_contiguous() {
            // The kernel copies a strided input (a broadcast view holds few values but its
            // copy holds every element).
            crate::alloc::ensure_output(op, self.dims(), element_bytes)?;
        }
        let buffer = self.with_buffer(|buffer, layout| -> Result<CpuBuffer> {
            Ok(with_float!(buffer, op, |data: T| T::into_buffer(reduce(
                data, layout, axes, kind
            ))))
        })??;
        Ok(DynTensor::from_buffer(buffer, &out_dims))
    }

    /// Sum over `axes` (negative axes count from the end). An empty list sums nothing.
    pub fn sum(&self, axes: &[isize], keepdim: bool) -> Result<DynTensor> {
        crate::onnx::op(
            || self.sum_untraced(axes, keepdim),
            |e, out| {
                let axes = normalize_axes(axes, self.rank(), "sum")?;
                crate::onnx::onnx_reduce(e, self, &axes, keepdim, false, out)
            },
        )
    }

    fn sum_untraced(&self, axes: &[isize], keepdim: bool) -> Result<DynTensor> {
        let axes = normalize_axes(axes, self.rank(), "sum")?;
        let out = self.reduce_raw(&axes, keepdim, Reduction::Sum, "sum")?;
        Ok(record(out, &[self], || BackwardOp::Sum {
            input_dims: crate::shape::Dims::from_slice(self.dims()),
            axes,
            keepdim,
        }))
    }

    /// Sum of every element, as a rank-0 tensor.
    pub fn sum_all(&self) -> Result<DynTensor> {
        self.sum(&all_axes(self.rank()), false)
    }

    /// Mean over `axes`.
    pub fn mean(&self, axes: &[isize], keepdim: bool) -> Result<DynTensor> {
        crate::onnx::op(
            || self.mean_untraced(axes, keepdim),
            |e, out| {
                let axes = normalize_axes(axes, self.rank(), "mean")?;
                crate::onnx::onnx_reduce(e, self, &axes, keepdim, true, out)
            },
        )
    }

    fn mean_untraced(&self, axes: &[isize], keepdim: bool) -> Result<DynTensor> {
        let count = reduced_count(self.dims(), axes, "mean")?;
        self.sum(axes, keepdim)?.mul_scalar(1.0 / count)
    }

    /// Mean of every element.
    pub fn mean_all(&self) -> Result<DynTensor> {
        self.mean(&all_axes(self.rank()), false)
    }

    fn extremum(&self, axes: &[isize], keepdim: bool, max: bool) -> Result<DynTensor> {
        crate::onnx::op(
            || self.extremum_untraced(axes, keepdim, max),
            |e, out| {
                let axes = normalize_axes(axes, self.rank(), "max")?;
                crate::onnx::onnx_extremum(e, self, &axes, keepdim, max, out)
            },
        )
    }

    fn extremum_untraced(&self, axes: &[isize], keepdim: bool, max: bool) -> Result<DynTensor> {
        let op = if max { "max" } else { "min" };
        let axes = normalize_axes(axes, self.rank(), op)?;
        reject_empty_axes(self.dims(), &axes, op)?;
        let kind = if max { Reduction::Max } else { Reduction::Min };
        let out = self.reduce_raw(&axes, keepdim, kind, op)?;
        Ok(record(out, &[self], || BackwardOp::Extremum {
            input: Saved::new(self),
            axes,
            keepdim,
            max,
        }))
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
        crate::onnx::op(
            || self.arg_extremum_untraced(axis, keepdim, max),
            |e, out| {
                let axis = normalize_axis(axis, self.rank(), "argmax")?;
                crate::onnx::onnx_arg_extremum(e, self, axis, keepdim, max, out)
            },
        )
    }

    fn arg_extremum_untraced(&self, axis: isize, keepdim: bool, max: bool) -> Result<DynTensor> {
        let op = if max { "argmax" } else { "argmin" };
        let axis = normalize_axis(axis, self.rank(), op)?;
        reject_empty_axes(self.dims(), &[axis], op)?;
        #[cfg(feature = "gpu")]
        if let Some(gpu) = crate::device::gpu_of(op, &[self])? {
            return gpu.arg_reduce(
                self,
                axis,
                max,
                &reduced_dims(self.dims(), &[axis], keepdim),
            );
        }
        let indices = self.with_buffer(|buffer, layout| -> Result<Vec<i64>> {
            Ok(with_float!(buffer, op, |data: T| arg_extremum(
                data, layout, axis, max
            )))
        })??;
        Ok(DynTensor::from_buffer(
            CpuBuffer::I64(indices),
            &reduced_dims(self.dims(), &[axis], keepdim),
        ))
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
