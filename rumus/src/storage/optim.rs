//! Fused optimizer steps as storage runs them: parameters and state are written in place.

use super::Storage;
use super::dispatch::{IntoStorage, Operand, on_backend_mut};
use crate::backend::Optim;
use crate::backend::kinds::AdamScalars;
use crate::error::Result;

use triomphe::Arc;

impl Storage {
    /// One fused Adam step over the contiguous views `p`, `m`, `v` (written) from `g`;
    /// `false`, with nothing written, where the backend does not run it (dtypes, or
    /// operands sharing memory).
    pub(crate) fn adam_step(
        [p, m, v]: [Operand<'_>; 3],
        g: Operand<'_>,
        scalars: AdamScalars<f64>,
    ) -> Result<bool> {
        let ran = on_backend_mut!("Adam step", [p, m, v], [g], |be, [p, m, v], [g]| be
            .adam_step([p, m, v], g, scalars))?;
        Ok(ran == Some(true))
    }

    /// `g * scale`, raising `flag` (written) where an element overflows; `None` where the
    /// backend does not run it.
    pub(crate) fn unscale_flagging_non_finite(
        g: Operand<'_>,
        scale: f64,
        flag: Operand<'_>,
    ) -> Result<Option<Arc<Storage>>> {
        let out = on_backend_mut!("GradScaler::unscale", [flag], [g], |be, [flag], [g]| Ok(be
            .unscale_flagging_non_finite(g, scale, flag)?
            .map(IntoStorage::into_storage)))?;
        Ok(out.flatten())
    }
}
