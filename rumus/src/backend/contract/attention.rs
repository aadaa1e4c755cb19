//! Fused scaled dot-product attention: `softmax(scale q k^T + masks) v` without the `[T, S]`
//! scores in memory, forward and backward.

use super::{Backend, Src};
use crate::backend::kinds::Geometry;
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Layout;

/// A result in fresh memory and the view of it that is the result (a backend may keep its
/// operands' memory layout, heads split from rows read where they lie).
pub type Viewed<M> = (M, Layout);

/// The layout of a fresh result with rows `width` wide for the operand `like` (`[.., rows,
/// *]`): where `like` is a `[B, H, T, *]` view of `[B, T, H, *]` memory (heads split from a
/// projection), the result is stored `[B, T, H, width]` and viewed as `[B, H, T, width]`, so
/// that merging the heads back copies nothing; otherwise it is contiguous.
#[cfg(any(feature = "gpu", feature = "cuda"))]
pub(crate) fn result_layout(like: &Layout, width: usize) -> Layout {
    let mut dims = like.dims().to_vec();
    let rank = dims.len();
    dims[rank - 1] = width;
    let strides = like.strides();
    if rank == 4 && strides[1] < strides[2] {
        Layout::contiguous(&[dims[0], dims[2], dims[1], width]).permute(&[0, 2, 1, 3])
    } else {
        Layout::contiguous(&dims)
    }
}

/// A fused attention's output (with its view) and each query row's log-sum-exp.
pub type Forward<M> = (Viewed<M>, M);

/// Fused attention kernels. `q` is `[.., T, D]`, `k` `[.., S, D]`, `v` `[.., S, Dv]` (one
/// float dtype, `g.batch` problems over the leading dims), `mask` a key padding mask as
/// `bool` `[B, S]` on the same device (`g` says which problems share a row of it).
/// `autocast` says in which dtype (`f16`, `bf16`) the forward pass ran under autocast, if it
/// did, whose kernels a backend may
/// have (the backward pass runs the forward pass's kernels).
pub trait Attention: Backend {
    /// The output (`[.., T, Dv]`, any view) and each query row's log-sum-exp
    /// (`[batch, t]`, contiguous); `None` where the backend has no fused kernel for these
    /// sizes (the op then composes the attention from products and a softmax).
    fn attention_forward(
        &self,
        [q, k, v]: [Src<'_, Self::Memory>; 3],
        mask: Option<Src<'_, Self::Memory>>,
        g: &Geometry,
        autocast: Option<DType>,
    ) -> Result<Option<Forward<Self::Memory>>> {
        let _ = (q, k, v, mask, g, autocast);
        Err(self.unsupported("scaled_dot_product_attention"))
    }

    /// The gradients of `q`, `k` and `v` (each with its operand's dims, any view) from the
    /// forward pass's output and log-sum-exp and the output's gradient `grad`.
    fn attention_backward(
        &self,
        [q, k, v]: [Src<'_, Self::Memory>; 3],
        mask: Option<Src<'_, Self::Memory>>,
        [out, lse, grad]: [Src<'_, Self::Memory>; 3],
        g: &Geometry,
        autocast: Option<DType>,
    ) -> Result<[Viewed<Self::Memory>; 3]> {
        let _ = (q, k, v, mask, out, lse, grad, g, autocast);
        Err(self.unsupported("scaled_dot_product_attention"))
    }

    /// Whether an attention with rows `width` wide would run on matrix units (under
    /// `autocast`), where rounding to `f16` changes its results.
    fn attention_on_matrix_units(&self, width: usize, autocast: Option<DType>) -> bool {
        let _ = (width, autocast);
        false
    }
}
