//! Indexing with an `i64` index: whole slices along an axis (`index_select`, `index_add`)
//! or single elements (`gather`, `scatter_add`). Each read's adjoint is the matching add.

use super::{Backend, Src};
use crate::dtype::DType;
use crate::error::{Error, Result};

/// Indexing kernels. Shapes are checked by the op; the index's dtype and values are checked
/// by the backend (the host checks every index before it touches memory).
pub trait Index: Backend {
    /// The slices `indices` (1-D) of `x` along `axis`, in that order.
    fn index_select(
        &self,
        x: Src<'_, Self::Memory>,
        axis: usize,
        indices: Src<'_, Self::Memory>,
    ) -> Result<Self::Memory> {
        let _ = (x, axis, indices);
        Err(self.unsupported("index_select"))
    }

    /// `out[p] = x[p with axis := indices[p]]`, shaped like `indices`.
    fn gather(
        &self,
        x: Src<'_, Self::Memory>,
        axis: usize,
        indices: Src<'_, Self::Memory>,
    ) -> Result<Self::Memory> {
        let _ = (x, axis, indices);
        Err(self.unsupported("gather"))
    }

    /// A copy of `base` with slice `k` of `source` added at slice `indices[k]` of `axis`.
    fn index_add(
        &self,
        base: Src<'_, Self::Memory>,
        axis: usize,
        indices: Src<'_, Self::Memory>,
        source: Src<'_, Self::Memory>,
    ) -> Result<Self::Memory> {
        let _ = (base, axis, indices, source);
        Err(self.unsupported("index_add"))
    }

    /// A copy of `base` with `source[p]` added at `p with axis := indices[p]`.
    fn scatter_add(
        &self,
        base: Src<'_, Self::Memory>,
        axis: usize,
        indices: Src<'_, Self::Memory>,
        source: Src<'_, Self::Memory>,
    ) -> Result<Self::Memory> {
        let _ = (base, axis, indices, source);
        Err(self.unsupported("scatter_add"))
    }
}

/// The index of every indexing op is an `i64` tensor.
pub fn check_index_dtype(indices: DType, op: &'static str) -> Result<()> {
    if indices != DType::I64 {
        return Err(Error::DType {
            op,
            expected: "an i64 index tensor",
            found: indices,
        });
    }
    Ok(())
}
