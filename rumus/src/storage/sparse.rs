//! Sparse kernels on a compressed-row pattern ([`crate::backend::Sparse`]).

use super::Storage;
use super::dispatch::{Operand, on_backend};
use crate::backend::{CsrPattern, Sparse};
use crate::error::Result;

use triomphe::Arc;

impl Storage {
    /// The sparse matrix `(row_ptr, cols, values)` times the dense `x`.
    pub(crate) fn spmm(
        row_ptr: Operand<'_>,
        cols: Operand<'_>,
        values: Operand<'_>,
        x: Operand<'_>,
    ) -> Result<Arc<Storage>> {
        on_backend!("spmm", [row_ptr, cols, values, x], |be, [r, c, v, x]| be
            .spmm(
                CsrPattern {
                    row_ptr: r,
                    cols: c
                },
                v,
                x
            ))
    }

    /// `a b^T` read at the entries of the pattern `(row_ptr, cols)`.
    pub(crate) fn sddmm(
        row_ptr: Operand<'_>,
        cols: Operand<'_>,
        a: Operand<'_>,
        b: Operand<'_>,
    ) -> Result<Arc<Storage>> {
        on_backend!("sddmm", [row_ptr, cols, a, b], |be, [r, c, a, b]| be.sddmm(
            CsrPattern {
                row_ptr: r,
                cols: c
            },
            a,
            b
        ))
    }

    /// Each row's maximum of `messages` (one per entry) and the entry it came from.
    pub(crate) fn segment_max(
        row_ptr: Operand<'_>,
        messages: Operand<'_>,
    ) -> Result<(Arc<Storage>, Arc<Storage>)> {
        on_backend!("segment_max", [row_ptr, messages], |be, [r, m]| be
            .segment_max(r, m))
    }
}
