//! Layer normalisation over the last axis as one op with one `LayerNorm` record, run by
//! fused kernels on the CPU (`backend::cpu::norm`) and the GPU (`shaders/norm.wgsl`). The
//! composite form (eight tensor ops forward, about thirty backward) read the rows once per op;
//! these read them twice forward and three times backward.
//!
//! When the backward pass is itself recorded (`create_graph`), the gradients are built from
//! differentiable ops instead, so gradients of any order stay available.

use super::BackwardOp;
use crate::autograd::{Saved, is_grad_enabled, record};
use crate::dtype::DType;
use crate::error::Result;
use crate::storage::Storage;
use crate::tensor::DynTensor;

/// Whether the fused kernels may cover `x` with this weight and bias: a float tensor whose
/// parameters (when given) are `[d]` vectors of its dtype, `d` its last axis (a backend may
/// still decline, by the length of the rows or the dtype).
fn covered(x: &DynTensor, weight: Option<&DynTensor>, bias: Option<&DynTensor>) -> bool {
    let Some(&d) = x.dims().last() else {
        return false;
    };
    let float = matches!(x.dtype(), DType::F32 | DType::F64);
    let parameter_fits =
        |p: Option<&DynTensor>| p.is_none_or(|p| p.dims() == [d] && p.dtype() == x.dtype());
    float && d > 0 && x.numel() > 0 && parameter_fits(weight) && parameter_fits(bias)
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
    let Some((out, stats)) = forward_untracked(x, weight, bias, eps)? else {
        return Ok(None);
    };
    Ok(Some(record(out, &inputs, || BackwardOp::LayerNorm {
        input: Saved::new(x),
        weight: weight.map(Saved::new),
        has_bias: bias.is_some(),
        stats,
        eps,
    })))
}

/// The normalised values and each row's `[mean, rstd]` (a `[rows, 2]` tensor), or `None`
/// where the backend has no kernel for the operands.
fn forward_untracked(
    x: &DynTensor,
    weight: Option<&DynTensor>,
    bias: Option<&DynTensor>,
    eps: f64,
) -> Result<Option<(DynTensor, DynTensor)>> {
    let fused = Storage::layer_norm(
        x.operand(),
        weight.map(DynTensor::operand),
        bias.map(DynTensor::operand),
        eps,
    )?;
    Ok(fused.map(|(out, stats)| {
        let rows = stats.len() / 2;
        (
            DynTensor::computed(out, x.dims()),
            DynTensor::computed(stats, &[rows, 2]),
        )
    }))
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
    let grads = Storage::layer_norm_backward(
        grad.operand(),
        x.operand(),
        w.map(DynTensor::operand),
        stats.operand(),
        wanted,
    )?;
    let n = x.dims()[x.rank() - 1];
    let [gx, gw, gb] = grads;
    Ok([
        gx.map(|g| DynTensor::computed(g, x.dims())),
        gw.map(|g| DynTensor::computed(g, &[n])),
        gb.map(|g| DynTensor::computed(g, &[n])),
    ])
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
