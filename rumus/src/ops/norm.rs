//! Layer normalisation over the last axis as one op with one `LayerNorm` record, run by
//! fused kernels on the CPU (`backend::cpu::norm`) and the GPU (`shaders/norm.wgsl`). The
//! composite form (eight tensor ops forward, about thirty backward) read the rows once per op;
//! these read them twice forward and three times backward.
//!
//! When the backward pass is itself recorded (`create_graph`), the gradients are built from
//! differentiable ops instead, so gradients of any order stay available.

use super::BackwardOp;
use crate::autograd::{Saved, is_grad_enabled, record};
use crate::backend::cpu::norm::{self as kernel, Affine, RowStats};
use crate::dtype::DType;
use crate::element::Float;
use crate::error::Result;
use crate::tensor::DynTensor;

/// Whether the fused kernels cover `x` with this weight and bias: a float tensor whose
/// parameters (when given) are `[d]` vectors of its dtype, `d` its last axis.
fn covered(x: &DynTensor, weight: Option<&DynTensor>, bias: Option<&DynTensor>) -> bool {
    let Some(&d) = x.dims().last() else {
        return false;
    };
    let float =
        matches!(x.dtype(), DType::F32) || (x.dtype() == DType::F64 && !x.storage().is_on_gpu());
    let parameter_fits =
        |p: Option<&DynTensor>| p.is_none_or(|p| p.dims() == [d] && p.dtype() == x.dtype());
    #[cfg(feature = "gpu")]
    let kernel_fits = !x.storage().is_on_gpu() || d <= crate::backend::gpu::LONGEST_NORM_ROW;
    #[cfg(not(feature = "gpu"))]
    let kernel_fits = true;
    float && kernel_fits && d > 0 && x.numel() > 0 && parameter_fits(weight) && parameter_fits(bias)
}

/// `(x - mean) / sqrt(var + eps) * weight + bias` over the last axis of `x` through the fused
/// kernels, or `None` when they do not cover the operands (the caller composes the op then).
pub(crate) fn layer_norm(
    x: &DynTensor,
    weight: Option<&DynTensor>,
    bias: Option<&DynTensor>,
    eps: f64,
) -> Result<Option<DynTensor>> {
    if !covered(x, weight, bias) {
        return Ok(None);
    }
    let mut inputs = vec![x];
    inputs.extend(weight);
    inputs.extend(bias);
    let (out, stats) = forward_untracked(x, weight, bias, eps, &inputs)?;
    Ok(Some(record(out, &inputs, || BackwardOp::LayerNorm {
        input: Saved::new(x),
        weight: weight.map(Saved::new),
        has_bias: bias.is_some(),
        stats,
        eps,
    })))
}

/// The normalised values and each row's `[mean, rstd]` (a `[rows, 2]` tensor).
fn forward_untracked(
    x: &DynTensor,
    weight: Option<&DynTensor>,
    bias: Option<&DynTensor>,
    eps: f64,
    operands: &[&DynTensor],
) -> Result<(DynTensor, DynTensor)> {
    #[cfg(feature = "gpu")]
    if let Some(gpu) = crate::device::gpu_of("layer_norm", operands)? {
        return gpu.layer_norm(x, weight, bias, eps);
    }
    #[cfg(not(feature = "gpu"))]
    let _ = operands;
    if x.dtype() == DType::F64 {
        forward_on_host::<f64>(x, weight, bias, eps)
    } else {
        forward_on_host::<f32>(x, weight, bias, eps)
    }
}

fn forward_on_host<T: Float + Default>(
    x: &DynTensor,
    weight: Option<&DynTensor>,
    bias: Option<&DynTensor>,
    eps: f64,
) -> Result<(DynTensor, DynTensor)> {
    let n = x.dims()[x.rank() - 1];
    // The parameters are `[n]` vectors: copied, so only `x`'s storage is locked below.
    let weight = weight.map(DynTensor::to_vec::<T>).transpose()?;
    let bias = bias.map(DynTensor::to_vec::<T>).transpose()?;
    let affine = Affine {
        weight: weight.as_deref(),
        bias: bias.as_deref(),
    };
    let (values, stats) = with_elements(x, |xs: &[T]| {
        kernel::layer_norm_rows(xs, n, affine, T::from_f64(eps))
    })?;
    let flat: Vec<T> = stats.iter().flat_map(|s| [s.mean, s.rstd]).collect();
    Ok((
        DynTensor::from_buffer(T::into_buffer(values), x.dims()),
        DynTensor::from_buffer(T::into_buffer(flat), &[stats.len(), 2]),
    ))
}

/// The contiguous elements of float tensor `t` (of element type `T`), handed to `f`.
fn with_elements<T: Float, R>(t: &DynTensor, f: impl FnOnce(&[T]) -> R) -> Result<R> {
    let t = t.contiguous_untracked()?;
    t.with_buffer(|buffer, layout| match T::slice(buffer) {
        Some(all) => Ok(f(&all[layout.offset()..layout.offset() + layout.numel()])),
        None => Err(crate::Error::DType {
            op: "layer_norm",
            expected: std::any::type_name::<T>(),
            found: buffer.dtype(),
        }),
    })?
}

/// Gradients of the input, the weight and the bias (those present, in that order) of a
/// layer normalisation given the gradient of its output.
pub(crate) fn layer_norm_backward(
    grad: &DynTensor,
    input: &Saved,
    weight: Option<&Saved>,
    has_bias: bool,
    (stats, eps): (&DynTensor, f64),
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let x = input.get("layer_norm")?;
    let w = weight.map(|w| w.get("layer_norm")).transpose()?;
    // Which gradients are wanted: input, weight, bias (absent parameters want none).
    let weight_at = w.is_some().then_some(1);
    let bias_at = has_bias.then_some(1 + usize::from(w.is_some()));
    let wants = |at: Option<usize>| at.is_some_and(|i| needs[i]);
    let wanted = [needs[0], wants(weight_at), wants(bias_at)];
    let [gx, gw, gb] = if is_grad_enabled() {
        recorded_gradients(grad, x, w, eps, wanted)?
    } else {
        fused_gradients(grad, x, w, stats, wanted)?
    };
    let mut grads = vec![gx];
    if w.is_some() {
        grads.push(gw);
    }
    if has_bias {
        grads.push(gb);
    }
    Ok(grads)
}

type Gradients = [Option<DynTensor>; 3];

/// The three gradients from the fused kernels (nothing recorded).
fn fused_gradients(
    grad: &DynTensor,
    x: &DynTensor,
    w: Option<&DynTensor>,
    stats: &DynTensor,
    wanted: [bool; 3],
) -> Result<Gradients> {
    // Made contiguous once for every kernel (a loss's gradient is often a broadcast).
    let grad = grad.contiguous_untracked()?;
    #[cfg(feature = "gpu")]
    if let Some(gpu) = crate::device::gpu_of("layer_norm", &[&grad, x])? {
        return gpu.layer_norm_backward(&grad, x, w, stats, wanted);
    }
    if x.dtype() == DType::F64 {
        gradients_on_host::<f64>(&grad, x, w, stats, wanted)
    } else {
        gradients_on_host::<f32>(&grad, x, w, stats, wanted)
    }
}

fn gradients_on_host<T: Float + Default>(
    grad: &DynTensor,
    x: &DynTensor,
    w: Option<&DynTensor>,
    stats: &DynTensor,
    [want_x, want_w, want_b]: [bool; 3],
) -> Result<Gradients> {
    let n = x.dims()[x.rank() - 1];
    let stats: Vec<RowStats<T>> = stats
        .to_vec::<T>()?
        .chunks_exact(2)
        .map(|pair| RowStats {
            mean: pair[0],
            rstd: pair[1],
        })
        .collect();
    let weight = w.map(DynTensor::to_vec::<T>).transpose()?;
    let wrap =
        |values: Vec<T>, dims: &[usize]| DynTensor::from_buffer(T::into_buffer(values), dims);
    with_elements(grad, |g: &[T]| {
        with_elements(x, |xs: &[T]| {
            let gx = want_x.then(|| {
                let values = kernel::layer_norm_input_grad(g, xs, &stats, weight.as_deref());
                wrap(values, x.dims())
            });
            let (gw, gb) = if want_w || want_b {
                let (gw, gb) = kernel::layer_norm_affine_grads(g, xs, &stats);
                (
                    want_w.then(|| wrap(gw, &[n])),
                    want_b.then(|| wrap(gb, &[n])),
                )
            } else {
                (None, None)
            };
            [gx, gw, gb]
        })
    })?
}

/// The three gradients from differentiable ops, for a recorded backward pass: the same
/// formulas as the fused kernels, with the statistics recomputed from `x` so they carry
/// their own gradients.
fn recorded_gradients(
    grad: &DynTensor,
    x: &DynTensor,
    w: Option<&DynTensor>,
    eps: f64,
    [want_x, want_w, want_b]: [bool; 3],
) -> Result<Gradients> {
    let n = x.dims()[x.rank() - 1];
    let centered = x.sub(&x.mean(&[-1], true)?)?;
    let rstd = centered
        .mul(&centered)?
        .mean(&[-1], true)?
        .add_scalar(eps)?
        .rsqrt()?;
    let xhat = centered.mul(&rstd)?;
    let gx = if want_x {
        let dxhat = match w {
            Some(w) => grad.mul(w)?,
            None => grad.clone(),
        };
        let projection = xhat.mul(&dxhat.mul(&xhat)?.mean(&[-1], true)?)?;
        let centered_dxhat = dxhat.sub(&dxhat.mean(&[-1], true)?)?;
        Some(rstd.mul(&centered_dxhat.sub(&projection)?)?)
    } else {
        None
    };
    let gw = want_w.then(|| grad.mul(&xhat)?.sum_to(&[n])).transpose()?;
    let gb = want_b.then(|| grad.sum_to(&[n])).transpose()?;
    Ok([gx, gw, gb])
}
