//! In-place updates of a view from another operand (optimizers, running statistics,
//! `copy_`). Storage hands the kernel a source that shares no memory with the destination.

use super::{Backend, Dst, Src};
use crate::error::Result;

/// In-place update kernels; `src` is viewed with `dst`'s dims (broadcast where it
/// broadcasts), and no two elements of `dst` share memory.
pub trait Update: Backend {
    /// `dst = dst * scale + alpha * src` (float); with `scale == 0` an overwrite that keeps
    /// no NaN or infinity of the old values.
    fn scale_add(
        &self,
        dst: Dst<'_, Self::Memory>,
        src: Src<'_, Self::Memory>,
        scale: f64,
        alpha: f64,
    ) -> Result<()> {
        let _ = (dst, src, scale, alpha);
        Err(self.unsupported("in-place update"))
    }

    /// `dst = src`, any dtype (both the same).
    fn copy_into(&self, dst: Dst<'_, Self::Memory>, src: Src<'_, Self::Memory>) -> Result<()> {
        let _ = (dst, src);
        Err(self.unsupported("copy_"))
    }
}
