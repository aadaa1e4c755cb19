//! Products and reductions over a sparse matrix in compressed-row form: the kernels under
//! [`crate::sparse`] and the graph layers. The matrix's structure comes as [`CsrPattern`]
//! (row pointers and column indices, `i64`), checked when the matrix was built; the dense
//! operands are float tensors whose first axis is indexed by the pattern and whose other
//! axes are one row of features.

use super::{Backend, Src};
use crate::error::{Result, ShapeError};

/// The structure of an `n x m` sparse matrix in compressed-row form: the entries of row `i`
/// are `row_ptr[i]..row_ptr[i + 1]`, entry `e` sits in column `cols[e]`.
pub struct CsrPattern<'a, M> {
    /// `n + 1` nondecreasing offsets from 0 to the number of entries, `i64`.
    pub row_ptr: Src<'a, M>,
    /// The column of each entry, `i64`, each in `0..m`.
    pub cols: Src<'a, M>,
}

impl<M> Clone for CsrPattern<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M> Copy for CsrPattern<'_, M> {}

/// Sparse kernels. The pattern's indices were checked by the caller against the shapes;
/// kernels still never read out of bounds on a bad one (the host's are bounds-checked).
pub trait Sparse: Backend {
    /// `out[i] = sum over the entries e of row i of values[e] * x[cols[e]]`: a sparse `[n,
    /// m]` matrix times a dense `[m, ...]` one, giving `[n, ...]` (0 for a row with no
    /// entries). `values` is 1-D, one per entry, of `x`'s dtype.
    fn spmm(
        &self,
        pattern: CsrPattern<'_, Self::Memory>,
        values: Src<'_, Self::Memory>,
        x: Src<'_, Self::Memory>,
    ) -> Result<Self::Memory> {
        let _ = (pattern, values, x);
        Err(self.unsupported("spmm"))
    }

    /// `out[e] = dot(a[i], b[cols[e]])` for each entry `e` of row `i`: the dense product `a
    /// b^T` read only at the pattern's entries (SDDMM). `a` is `[n, ...]`, `b` is `[m, ...]`
    /// with the same trailing axes; the result is 1-D, one per entry.
    fn sddmm(
        &self,
        pattern: CsrPattern<'_, Self::Memory>,
        a: Src<'_, Self::Memory>,
        b: Src<'_, Self::Memory>,
    ) -> Result<Self::Memory> {
        let _ = (pattern, a, b);
        Err(self.unsupported("sddmm"))
    }

    /// The maximum of each row's entries of `messages` (`[entries, ...]`, one slice per
    /// entry, in the pattern's order), feature by feature: `[n, ...]`, and the `i64` entry
    /// each maximum came from, of the same shape. A row with no entries gives 0 and the
    /// entry index `entries` (one past the last), so a gradient routed by it lands outside
    /// the messages. A NaN message wins its feature on the host and on CUDA, as `torch.amax`
    /// lets it; WGSL promises nothing about NaN comparisons, so on wgpu it may not.
    fn segment_max(
        &self,
        row_ptr: Src<'_, Self::Memory>,
        messages: Src<'_, Self::Memory>,
    ) -> Result<(Self::Memory, Self::Memory)> {
        let _ = (row_ptr, messages);
        Err(self.unsupported("segment_max"))
    }
}

/// A dense operand's first axis (what the pattern indexes) and the product of the others
/// (one row's width), or an error for a rank-0 operand.
pub fn split_rows(dims: &[usize], op: &'static str) -> Result<(usize, usize)> {
    match dims.split_first() {
        Some((&rows, rest)) => Ok((rows, rest.iter().product())),
        None => Err(ShapeError::Invalid {
            context: op.into(),
            message: "a dense operand needs at least one axis".into(),
        }
        .into()),
    }
}
