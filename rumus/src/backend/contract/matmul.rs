//! Matrix products: batched, broadcast and strided, with an optional bias on every row.

use super::{Backend, Src};
use crate::error::Result;

/// Matrix product kernels.
pub trait Matmul: Backend {
    /// `a @ b` of operands already broadcast to `[batch.., m, k]` and `[batch.., k, n]` (one
    /// dtype, checked by the op), the result contiguous `[batch.., m, n]` (`out_dims`), plus
    /// `bias` (`n` values of the operands' dtype, or `f32` when widening) added to every
    /// row. `widen` asks for `f16` operands' sums in `f32`, unrounded (autocast's products);
    /// a backend that does not widen in its kernel ignores it (its callers widen the operands
    /// first).
    fn matmul(
        &self,
        a: Src<'_, Self::Memory>,
        b: Src<'_, Self::Memory>,
        bias: Option<Src<'_, Self::Memory>>,
        out_dims: &[usize],
        widen: bool,
    ) -> Result<Self::Memory> {
        let _ = (a, b, bias, out_dims, widen);
        Err(self.unsupported("matmul"))
    }
}
