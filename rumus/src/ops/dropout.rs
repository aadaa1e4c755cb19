//! Dropout as one op, alone or after an activation. Each element's keep-or-drop draw is a hash
//! of a seed and its index (`backend::cpu::dropout`, and the same function in
//! `shaders/elementwise.wgsl`), so no mask is kept: the forward pass reads the input and
//! writes the output once, and the backward pass applies the same draws to the gradient. A
//! seed drops the same elements on the CPU and on a GPU.
//!
//! `dropout(op(x))` for an activation `op` (a feed-forward block's ReLU or GELU and the dropout
//! after it) is one op too: on a GPU one pass forward and one backward, where the two ops
//! apart take two each and a `[tokens, features]` tensor in between.

use super::BackwardOp;
use crate::autograd::{Saved, record};
use crate::element::Element;
use crate::error::Result;
use crate::ops::conv::{FloatSlice, read_float};
use crate::ops::unary::{UnaryOp, unary_backward};
use crate::tensor::DynTensor;

/// Dropout's draws: elements whose draw under `seed` falls below `p` are zeroed, the others
/// multiplied by `scale`, `1 / (1 - p)`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DropoutDraws {
    pub p: f64,
    pub scale: f64,
    pub seed: u64,
}

impl DropoutDraws {
    /// `0 < p < 1`.
    fn new(p: f64, seed: u64) -> Self {
        DropoutDraws {
            p,
            scale: 1.0 / (1.0 - p),
            seed,
        }
    }
}

/// `x` with each element zeroed with probability `p` (`0 < p < 1`) and the rest scaled by
/// `1 / (1 - p)`, the draws made from `seed` over `x`'s elements in contiguous order.
pub(crate) fn seeded_dropout(x: &DynTensor, p: f64, seed: u64) -> Result<DynTensor> {
    let out = dropped_out(x, DropoutDraws::new(p, seed))?;
    Ok(record(out, &[x], || BackwardOp::Dropout { p, seed }))
}

/// The draws applied to `x`, untracked.
fn dropped_out(x: &DynTensor, draws: DropoutDraws) -> Result<DynTensor> {
    #[cfg(feature = "gpu")]
    if let Some(gpu) = crate::device::gpu_of("dropout", &[x])? {
        return gpu.dropout(x, draws);
    }
    let DropoutDraws { p, scale, seed } = draws;
    let buffer = read_float(x, "dropout", |data| match data {
        FloatSlice::F32(v) => f32::into_buffer(crate::backend::cpu::dropout::dropout(
            v,
            p,
            scale as f32,
            seed,
        )),
        FloatSlice::F64(v) => {
            f64::into_buffer(crate::backend::cpu::dropout::dropout(v, p, scale, seed))
        }
    })?;
    Ok(DynTensor::from_buffer(buffer, x.dims()))
}

/// The input gradient of [`seeded_dropout`]: the same draws applied to `grad` (recorded like
/// the forward op when the backward pass is itself recorded).
pub(crate) fn dropout_backward(grad: &DynTensor, p: f64, seed: u64) -> Result<DynTensor> {
    seeded_dropout(grad, p, seed)
}

/// `seeded_dropout(op(x), p, seed)`, the same values and draws, as one op: one kernel on a
/// GPU, and a record that keeps only `x`. `op` is an activation whose gradient takes one pass
/// ([`UnaryOp::gradient_in_one_pass`]); an ONNX trace gets the two ops apart.
pub(crate) fn seeded_activation_dropout(
    x: &DynTensor,
    op: UnaryOp,
    p: f64,
    seed: u64,
) -> Result<DynTensor> {
    if crate::onnx::tracing() || !op.gradient_in_one_pass() {
        return seeded_dropout(&x.unary(op)?, p, seed);
    }
    let draws = DropoutDraws::new(p, seed);
    #[cfg(feature = "gpu")]
    let gpu = crate::device::gpu_of(op.name(), &[x])?;
    #[cfg(feature = "gpu")]
    let out = match gpu {
        Some(gpu) => gpu.unary_then_dropout(x, op, Some(draws))?,
        None => dropped_out(&x.unary_untracked(op)?, draws)?,
    };
    #[cfg(not(feature = "gpu"))]
    let out = dropped_out(&x.unary_untracked(op)?, draws)?;
    Ok(record(out, &[x], || BackwardOp::ActivationDropout {
        op,
        input: Saved::new(x),
        p,
        seed,
    }))
}

/// The input gradient of [`seeded_activation_dropout`]: `d op(x) / dx` times the draws
/// applied to `grad`, in one pass on a GPU (when the backward pass is not itself recorded).
pub(crate) fn activation_dropout_backward(
    grad: &DynTensor,
    op: UnaryOp,
    input: &Saved,
    p: f64,
    seed: u64,
) -> Result<DynTensor> {
    #[cfg(feature = "gpu")]
    {
        let x = input.get(op.name())?;
        if !crate::autograd::is_grad_enabled()
            && grad.dims() == x.dims()
            && let Some(gpu) = crate::device::gpu_of(op.name(), &[grad, x])?
            && let Some(fused) =
                gpu.activation_grad(grad, x, op, Some(DropoutDraws::new(p, seed)))?
        {
            return Ok(fused);
        }
    }
    unary_backward(&dropout_backward(grad, p, seed)?, op, Some(input))
}
