//! ONNX normalisations, run with rumus's ops: `BatchNormalization` (inference, with the
//! running statistics), `InstanceNormalization` (PyTorch's `GroupNorm` and `InstanceNorm2d`
//! export as it) and `LayerNormalization`.

use super::import_ops::{arg, invalid};
use crate::error::Result;
use crate::tensor::DynTensor;

/// `[C]` reshaped to broadcast over axis 1 of a rank-`rank` input.
fn per_channel(t: &DynTensor, rank: usize) -> Result<DynTensor> {
    if rank < 2 {
        return Err(invalid(format!(
            "per-channel values need an input of rank 2 or more ([N, C, ...]), got rank {rank}"
        )));
    }
    let mut dims = vec![1; rank];
    dims[1] = t.numel();
    t.reshape(&dims)
}

/// `(x - mean) / sqrt(var + eps)` with the mean and variance over `axes` (kept).
fn standardized(x: &DynTensor, axes: &[isize], eps: f64) -> Result<DynTensor> {
    let centered = x.sub(&x.mean(axes, true)?)?;
    let var = centered.mul(&centered)?.mean(axes, true)?;
    centered.mul(&var.add_scalar(eps)?.rsqrt()?)
}

/// Inference-mode batch normalisation with the running statistics (inputs: x, scale, bias,
/// mean, var).
pub(super) fn batch_norm(
    args: &[Option<&DynTensor>],
    training: bool,
    eps: f64,
) -> Result<DynTensor> {
    if training {
        return Err(invalid(
            "BatchNormalization in training mode; export the model in eval mode",
        ));
    }
    let x = arg(args, 0)?;
    let rank = x.rank();
    let [scale, bias, mean, var] =
        [1, 2, 3, 4].map(|k| arg(args, k).and_then(|t| per_channel(t, rank)));
    let inv_std = var?.add_scalar(eps)?.rsqrt()?;
    x.sub(&mean?)?.mul(&inv_std.mul(&scale?)?)?.add(&bias?)
}

/// Each channel of each sample standardized over its spatial axes (2..), then the
/// per-channel affine (inputs: x `[N, C, ...]`, scale `[C]`, bias `[C]`).
pub(super) fn instance_norm(args: &[Option<&DynTensor>], eps: f64) -> Result<DynTensor> {
    let x = arg(args, 0)?;
    let rank = x.rank();
    if rank < 3 {
        return Err(invalid(format!(
            "InstanceNormalization of a rank-{rank} input: it takes [N, C, D1, ...]"
        )));
    }
    let axes: Vec<isize> = (2..rank as isize).collect();
    let (scale, bias) = (
        per_channel(arg(args, 1)?, rank)?,
        per_channel(arg(args, 2)?, rank)?,
    );
    standardized(x, &axes, eps)?.mul(&scale)?.add(&bias)
}

/// Standardized over the axes from `from` on, then the affine (inputs: x, scale, optional
/// bias).
pub(super) fn layer_norm(args: &[Option<&DynTensor>], from: usize, eps: f64) -> Result<DynTensor> {
    let x = arg(args, 0)?;
    let (scale, bias) = (arg(args, 1)?, args.get(2).copied().flatten());
    if from + 1 == x.rank() {
        return crate::nn::functional::layer_norm(x, Some(scale), bias, eps);
    }
    let axes: Vec<isize> = (from as isize..x.rank() as isize).collect();
    let out = standardized(x, &axes, eps)?.mul(scale)?;
    match bias {
        Some(bias) => out.add(bias),
        None => Ok(out),
    }
}
