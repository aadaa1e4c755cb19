//! Joining operands along an axis.

use super::{Backend, Src};
use crate::error::Result;

/// Joining kernels.
pub trait Join: Backend {
    /// `parts` (one dtype, equal dims but along `axis`) joined along `axis` into fresh
    /// contiguous memory of `dims`.
    fn cat(
        &self,
        parts: &[Src<'_, Self::Memory>],
        axis: usize,
        dims: &[usize],
    ) -> Result<Self::Memory> {
        let _ = (parts, axis, dims);
        Err(self.unsupported("cat"))
    }
}
