//! Indexing as storage runs it: the indexed operand, the index, and for the adds the values.

use super::Storage;
use super::dispatch::{Operand, on_backend};
use crate::backend::Index;
use crate::error::Result;

use triomphe::Arc;

impl Storage {
    /// The slices `indices` (1-D `i64`) of `x` along `axis`.
    pub(crate) fn index_select(
        x: Operand<'_>,
        axis: usize,
        indices: Operand<'_>,
    ) -> Result<Arc<Storage>> {
        on_backend!("index_select", [x, indices], |be, [x, i]| be
            .index_select(x, axis, i))
    }

    /// `x` read at `p with axis := indices[p]` for every position `p` of `indices`.
    pub(crate) fn gather(
        x: Operand<'_>,
        axis: usize,
        indices: Operand<'_>,
    ) -> Result<Arc<Storage>> {
        on_backend!("gather", [x, indices], |be, [x, i]| be.gather(x, axis, i))
    }

    /// A copy of `base` with `source`'s slices added at slices `indices` of `axis`.
    pub(crate) fn index_add(
        base: Operand<'_>,
        axis: usize,
        indices: Operand<'_>,
        source: Operand<'_>,
    ) -> Result<Arc<Storage>> {
        on_backend!("index_add", [base, indices, source], |be, [b, i, s]| be
            .index_add(b, axis, i, s))
    }

    /// A copy of `base` with `source[p]` added at `p with axis := indices[p]`.
    pub(crate) fn scatter_add(
        base: Operand<'_>,
        axis: usize,
        indices: Operand<'_>,
        source: Operand<'_>,
    ) -> Result<Arc<Storage>> {
        on_backend!("scatter_add", [base, indices, source], |be, [b, i, s]| be
            .scatter_add(b, axis, i, s))
    }
}
