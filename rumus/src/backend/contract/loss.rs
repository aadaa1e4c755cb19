//! Loss kernels: the one-pass gradient of the fused cross-entropy.

use super::{Backend, Src};
use crate::error::Result;

/// Loss kernels.
pub trait Loss: Backend {
    /// The gradient of a cross-entropy with respect to logits `[N, C, D..]` (float):
    /// `(exp(x - lse) - onehot(target)) * weight`, with `lse_and_weights` `[N, 1, D.., 2]`
    /// (each row's log-sum-exp and its weight) and `targets` `[N, 1, D..]` class indices
    /// (`i64`, checked to be classes). The result is contiguous with the logits' dims.
    fn cross_entropy_grad(
        &self,
        logits: Src<'_, Self::Memory>,
        lse_and_weights: Src<'_, Self::Memory>,
        targets: Src<'_, Self::Memory>,
    ) -> Result<Self::Memory> {
        let _ = (logits, lse_and_weights, targets);
        Err(self.unsupported("cross_entropy"))
    }
}
