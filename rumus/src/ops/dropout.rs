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
use crate::error::Result;
use crate::ops::unary::{UnaryOp, unary_backward};
use crate::storage::Storage;
use crate::tensor::DynTensor;

pub(crate) use crate::backend::kinds::DropoutDraws;

/// `x` with each element zeroed with probability `p` (`0 < p < 1`) and the rest scaled by
/// `1 / (1 - p)`, the draws made from `seed` over `x`'s elements in contiguous order.
pub(crate) fn seeded_dropout(x: &DynTensor, p: f64, seed: u64) -> Result<DynTensor> {
    let out = dropped_out(x, DropoutDraws::new(p, seed))?;
    Ok(record(out, &[x], || BackwardOp::Dropout { p, seed }))
}

/// The draws applied to `x`, untracked.
fn dropped_out(x: &DynTensor, draws: DropoutDraws) -> Result<DynTensor> {
    let out = Storage::dropout(x.operand(), draws)?;
    Ok(DynTensor::computed(out, x.dims()))
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
    if super::hooks::tracing() || !op.gradient_in_one_pass() {
        return seeded_dropout(&x.unary(op)?, p, seed);
    }
    let draws = DropoutDraws::new(p, seed);
    let out = match Storage::unary_dropout(x.operand(), op, draws)? {
        Some(fused) => DynTensor::computed(fused, x.dims()),
        None => dropped_out(&x.unary_untracked(op)?, draws)?,
    };
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
    let x = input.get(op.name())?;
    if !crate::autograd::is_grad_enabled()
        && grad.dims() == x.dims()
        && let Some(fused) = Storage::activation_grad(
            grad.operand(),
            x.operand(),
            op,
            Some(DropoutDraws::new(p, seed)),
        )?
    {
        return Ok(DynTensor::computed(fused, grad.dims()));
    }
    unary_backward(&dropout_backward(grad, p, seed)?, op, Some(input))
}
