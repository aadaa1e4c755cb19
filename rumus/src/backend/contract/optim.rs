//! Optimizer steps fused into one pass: they write parameters and state in place.

use super::{Backend, Dst, Src};
use crate::backend::kinds::AdamScalars;
use crate::error::Result;

/// Fused optimizer kernels. Each may answer that it does not run the case at hand (`false`,
/// `None`): the optimizer then takes its op-by-op path, which every backend runs.
pub trait Optim: Backend {
    /// One Adam/AdamW step (PyTorch's formula) over the contiguous views `[p, m, v]`,
    /// written in place, from the contiguous gradient `g`. `Ok(false)`, with nothing written,
    /// where the backend has no kernel for these dtypes.
    fn adam_step(
        &self,
        state: [Dst<'_, Self::Memory>; 3],
        g: Src<'_, Self::Memory>,
        scalars: AdamScalars<f64>,
    ) -> Result<bool> {
        let _ = (state, g, scalars);
        Ok(false)
    }

    /// `g * scale` as fresh memory, setting `flag` (one `i64`) nonzero where an element of
    /// `g` or of the result is infinite or NaN: a loss scaler's unscale and overflow check
    /// in one pass. `None` where the backend has no kernel for `g`'s dtype.
    fn unscale_flagging_non_finite(
        &self,
        g: Src<'_, Self::Memory>,
        scale: f64,
        flag: Dst<'_, Self::Memory>,
    ) -> Result<Option<Self::Memory>> {
        let _ = (g, scale, flag);
        Ok(None)
    }
}
