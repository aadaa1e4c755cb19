//! Normalisation and dropout as functions of tensors. The layers in this module hold their
//! parameters and call these; the functions are composites of differentiable ops, so their
//! gradients (of any order) come from the tape and have exactly the input's shape.

use crate::autograd::no_grad;
use crate::dtype::DType;
use crate::error::{Error, Result, ShapeError};
use crate::ops::hooks::{OpCall, apply};
use crate::ops::unary::UnaryOp;
use crate::rng::with_global;
use crate::tensor::DynTensor;

fn check_last_dim(x: &DynTensor, size: usize, op: &str) -> Result<()> {
    match x.dims().last() {
        Some(&d) if d == size => Ok(()),
        _ => Err(ShapeError::Invalid {
            context: op.into(),
            message: format!("input {:?} must end with an axis of size {size}", x.dims()),
        }
        .into()),
    }
}

/// `(x - mean) / sqrt(var + eps)` over the last axis, then `* weight + bias` (PyTorch
/// `layer_norm` with `normalized_shape = [D]`).
pub fn layer_norm(
    x: &DynTensor,
    weight: Option<&DynTensor>,
    bias: Option<&DynTensor>,
    eps: f64,
) -> Result<DynTensor> {
    apply(OpCall::LayerNorm { weight, bias, eps }, &[x], |_| {
        let d = *x.dims().last().ok_or_else(|| ShapeError::Invalid {
            context: "layer_norm".into(),
            message: "needs at least one axis".into(),
        })?;
        check_last_dim(x, d, "layer_norm")?;
        if let Some(fused) = crate::ops::norm::layer_norm(x, weight, bias, eps)? {
            return Ok(fused);
        }
        let centered = x.sub(&x.mean(&[-1], true)?)?;
        let var = centered.mul(&centered)?.mean(&[-1], true)?;
        affine(&centered.mul(&var.add_scalar(eps)?.rsqrt()?)?, weight, bias)
    })
}

/// `x / sqrt(mean(x^2) + eps) * weight` over the last axis (RMSNorm).
pub fn rms_norm(x: &DynTensor, weight: Option<&DynTensor>, eps: f64) -> Result<DynTensor> {
    let scale = x.mul(x)?.mean(&[-1], true)?.add_scalar(eps)?.rsqrt()?;
    affine(&x.mul(&scale)?, weight, None)
}

fn affine(
    x: &DynTensor,
    weight: Option<&DynTensor>,
    bias: Option<&DynTensor>,
) -> Result<DynTensor> {
    let x = match weight {
        Some(w) => x.mul(w)?,
        None => x.clone(),
    };
    match bias {
        Some(b) => x.add(b),
        None => Ok(x),
    }
}

/// Per-channel affine of `[N, C, ...]`: parameters `[C]` broadcast over the spatial axes.
fn channel_affine(
    x: &DynTensor,
    weight: Option<&DynTensor>,
    bias: Option<&DynTensor>,
) -> Result<DynTensor> {
    let mut dims = vec![1; x.rank()];
    dims[1] = x.dims()[1];
    let w = weight.map(|w| w.reshape(&dims)).transpose()?;
    let b = bias.map(|b| b.reshape(&dims)).transpose()?;
    affine(x, w.as_ref(), b.as_ref())
}

/// Group normalisation of `[N, C, ...]` over `groups` groups of channels (PyTorch
/// `group_norm`).
pub fn group_norm(
    x: &DynTensor,
    groups: usize,
    weight: Option<&DynTensor>,
    bias: Option<&DynTensor>,
    eps: f64,
) -> Result<DynTensor> {
    if x.rank() < 2 || groups == 0 || !x.dims()[1].is_multiple_of(groups) {
        return Err(ShapeError::Invalid {
            context: "group_norm".into(),
            message: format!(
                "input {:?} needs a channel axis divisible into {groups} groups",
                x.dims()
            ),
        }
        .into());
    }
    let n = x.dims()[0];
    // Channels divide into the groups, so n * groups overflows only when x is empty.
    let per_group = n
        .checked_mul(groups)
        .map_or(0, |rows| x.numel() / rows.max(1));
    let grouped = x.reshape(&[n, groups, per_group])?;
    let normed = layer_norm(&grouped, None, None, eps)?.reshape(x.dims())?;
    channel_affine(&normed, weight, bias)
}

/// Running statistics of a batch-norm layer, updated in place during training.
pub struct RunningStats<'a> {
    /// Running mean per channel, `[C]`.
    pub mean: &'a DynTensor,
    /// Running unbiased variance per channel, `[C]`.
    pub var: &'a DynTensor,
    /// Weight of the new batch statistic: `running = (1 - momentum) * running + momentum *
    /// batch`, as PyTorch's `momentum`.
    pub momentum: f64,
}

/// Batch normalisation of `[N, C]` or `[N, C, ...]` over every axis but the channels.
/// Training uses the batch statistics (biased variance) and updates `running` with the
/// unbiased variance, as PyTorch does; evaluation uses `running`.
pub fn batch_norm(
    x: &DynTensor,
    running: Option<RunningStats>,
    weight: Option<&DynTensor>,
    bias: Option<&DynTensor>,
    training: bool,
    eps: f64,
) -> Result<DynTensor> {
    let call = OpCall::BatchNorm {
        running: running.as_ref().map(|r| (r.mean, r.var)),
        weight,
        bias,
        training,
        eps,
    };
    apply(call, &[x], |_| {
        if x.rank() < 2 {
            return Err(ShapeError::Invalid {
                context: "batch_norm".into(),
                message: format!("input {:?} needs [N, C, ...]", x.dims()),
            }
            .into());
        }
        let channels = x.dims()[1];
        let axes: Vec<isize> = (0..x.rank() as isize).filter(|&a| a != 1).collect();
        let count = x.numel() / channels.max(1);
        let mut shape = vec![1; x.rank()];
        shape[1] = channels;
        let (mean, var) = if training {
            if count < 2 {
                return Err(Error::InvalidArgument {
                    op: "batch_norm",
                    message: format!(
                        "training needs more than one value per channel, got input {:?}",
                        x.dims()
                    ),
                });
            }
            let mean = x.mean(&axes, true)?;
            let centered = x.sub(&mean)?;
            let var = centered.mul(&centered)?.mean(&axes, true)?;
            if let Some(stats) = &running {
                let _guard = no_grad();
                let unbiased = var
                    .mul_scalar(count as f64 / (count - 1) as f64)?
                    .reshape(&[channels])?;
                stats.mean.scale_add_(
                    1.0 - stats.momentum,
                    stats.momentum,
                    &mean.detach().reshape(&[channels])?,
                )?;
                stats
                    .var
                    .scale_add_(1.0 - stats.momentum, stats.momentum, &unbiased.detach())?;
            }
            (mean, var)
        } else {
            let stats = running.ok_or_else(|| Error::InvalidArgument {
                op: "batch_norm",
                message: "evaluation mode needs running statistics".into(),
            })?;
            (stats.mean.reshape(&shape)?, stats.var.reshape(&shape)?)
        };
        let normed = x.sub(&mean)?.mul(&var.add_scalar(eps)?.rsqrt()?)?;
        channel_affine(&normed, weight, bias)
    })
}

/// Zeroes each element with probability `p` and scales the rest by `1 / (1 - p)` during
/// training; the identity otherwise. Takes one seed from the global generator, so
/// `manual_seed` makes the masks repeat; a seed gives the same mask on the CPU and a GPU.
pub fn dropout(x: &DynTensor, p: f64, training: bool) -> Result<DynTensor> {
    match dropout_seed("dropout", x, p, training)? {
        DropoutSeed::Identity => Ok(x.clone()),
        DropoutSeed::All => x.mul_scalar(0.0),
        DropoutSeed::Draw(seed) => crate::ops::dropout::seeded_dropout(x, p, seed),
    }
}

/// `dropout(&x.unary(activation)?, p, training)` as one op: the same values, draws and
/// gradients (on a GPU within f32 rounding: the backward kernel multiplies in another
/// order), but on a GPU one pass over the data forward and one backward instead of two
/// each, and no activation output kept in between (the feed-forward block of a
/// `TransformerEncoderBlock`: ReLU or GELU, then dropout). Activations whose gradient is one
/// pass (ReLU, leaky ReLU, sigmoid, tanh, both GELUs, SiLU) fuse; others run as the two ops.
///
/// ```
/// use rumus::{DType, DynTensor};
/// use rumus::nn::functional::{activation_dropout, dropout};
/// use rumus::ops::unary::UnaryOp;
///
/// # fn main() -> rumus::Result<()> {
/// let x = DynTensor::randn(&[4, 8], DType::F32)?;
/// rumus::manual_seed(3);
/// let fused = activation_dropout(&x, UnaryOp::Gelu, 0.25, true)?;
/// rumus::manual_seed(3);
/// let apart = dropout(&x.gelu()?, 0.25, true)?;
/// assert_eq!(fused.to_vec::<f32>()?, apart.to_vec::<f32>()?);
/// # Ok(())
/// # }
/// ```
pub fn activation_dropout(
    x: &DynTensor,
    activation: UnaryOp,
    p: f64,
    training: bool,
) -> Result<DynTensor> {
    match dropout_seed("activation_dropout", x, p, training)? {
        DropoutSeed::Identity => x.unary(activation),
        DropoutSeed::All => x.unary(activation)?.mul_scalar(0.0),
        DropoutSeed::Draw(seed) => {
            crate::ops::dropout::seeded_activation_dropout(x, activation, p, seed)
        }
    }
}

/// What a dropout with probability `p` does to `x`.
enum DropoutSeed {
    /// Nothing: evaluation mode or `p == 0`.
    Identity,
    /// Zeroes everything: `p == 1`.
    All,
    /// Draws from this seed.
    Draw(u64),
}

/// Checks `p` and `x` and takes the seed from the global generator when draws are needed.
fn dropout_seed(op: &'static str, x: &DynTensor, p: f64, training: bool) -> Result<DropoutSeed> {
    if !(0.0..=1.0).contains(&p) {
        return Err(Error::InvalidArgument {
            op,
            message: format!("probability {p} is outside [0, 1]"),
        });
    }
    if !x.dtype().is_float() {
        return Err(Error::DType {
            op,
            expected: "a floating-point tensor",
            found: x.dtype(),
        });
    }
    Ok(if !training || p == 0.0 {
        DropoutSeed::Identity
    } else if p == 1.0 {
        DropoutSeed::All
    } else {
        // One seed from the global generator; the draws are a hash of it and each element's
        // index, the same on the CPU and a GPU, so no mask is kept for the backward pass.
        DropoutSeed::Draw(with_global(|g| g.next_u64()))
    })
}

/// Rows `indices` (an `i64` tensor of any shape) of `weight` `[V, D]`: output
/// `[indices.., D]`. Indices outside `0..V` are an error.
pub fn embedding(weight: &DynTensor, indices: &DynTensor) -> Result<DynTensor> {
    apply(OpCall::Embedding { indices }, &[weight], |_| {
        if indices.dtype() != DType::I64 {
            return Err(Error::DType {
                op: "embedding",
                expected: "i64 indices",
                found: indices.dtype(),
            });
        }
        let &[_, features] = weight.dims() else {
            return Err(ShapeError::RankMismatch {
                context: "embedding weight".into(),
                expected: 2,
                expected_shape: "[num_embeddings, embedding_dim]".into(),
                found: weight.rank(),
                found_shape: weight.dims().to_vec(),
            }
            .into());
        };
        let flat = indices.reshape(&[indices.numel()])?;
        let rows = weight.index_select(0, &flat)?;
        let mut dims = indices.dims().to_vec();
        dims.push(features);
        rows.reshape(&dims)
    })
}
