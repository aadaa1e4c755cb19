//! Normalisation kernels: layer normalisation over the last axis, forward and backward.

use super::{Backend, Src};
use crate::error::Result;

/// Fused layer-normalisation kernels. The op checks the shapes first: `x` is float and not
/// empty, its last axis `n` is not empty, the weight and bias (when given) are `[n]`
/// vectors of `x`'s dtype.
pub trait Norm: Backend {
    /// `(x - mean) / sqrt(var + eps) * weight + bias` over the last axis of `x`: the values
    /// (contiguous, `x`'s dims) and each row's `[mean, rstd]` (`[rows, 2]`). `None` where
    /// the backend has no kernel for these operands (the op then composes the layer norm
    /// from other ops).
    fn layer_norm(
        &self,
        x: Src<'_, Self::Memory>,
        weight: Option<Src<'_, Self::Memory>>,
        bias: Option<Src<'_, Self::Memory>>,
        eps: f64,
    ) -> Result<Option<(Self::Memory, Self::Memory)>> {
        let _ = (x, weight, bias, eps);
        Ok(None)
    }

    /// The gradients of the input (`x`'s dims), the weight and the bias (`[n]` each) of
    /// [`layer_norm`](Self::layer_norm), those `wanted`, given the gradient `grad` of its
    /// output (contiguous) and the `stats` it returned.
    fn layer_norm_backward(
        &self,
        grad: Src<'_, Self::Memory>,
        x: Src<'_, Self::Memory>,
        weight: Option<Src<'_, Self::Memory>>,
        stats: Src<'_, Self::Memory>,
        wanted: [bool; 3],
    ) -> Result<[Option<Self::Memory>; 3]> {
        let _ = (grad, x, weight, stats, wanted);
        Err(self.unsupported("layer_norm"))
    }
}
