//! Normalisation kernels as storage runs them. Absent parameters are passed as `x` again
//! (a storage is locked once however often it appears) and reach the kernel as `None`.

use super::Storage;
use super::dispatch::{Operand, on_backend};
use crate::backend::Norm;
use crate::error::Result;

use triomphe::Arc;

impl Storage {
    /// Layer normalisation over the last axis: the values and each row's `[mean, rstd]`, or
    /// `None` where the backend has no kernel for these operands.
    pub(crate) fn layer_norm(
        x: Operand<'_>,
        weight: Option<Operand<'_>>,
        bias: Option<Operand<'_>>,
        eps: f64,
    ) -> Result<Option<(Arc<Storage>, Arc<Storage>)>> {
        let (has_weight, has_bias) = (weight.is_some(), bias.is_some());
        on_backend!(
            "layer_norm",
            [x, weight.unwrap_or(x), bias.unwrap_or(x)],
            |be, [x, w, b]| be.layer_norm(x, has_weight.then_some(w), has_bias.then_some(b), eps)
        )
    }

    /// The gradients of layer normalisation's input, weight and bias (those `wanted`).
    pub(crate) fn layer_norm_backward(
        grad: Operand<'_>,
        x: Operand<'_>,
        weight: Option<Operand<'_>>,
        stats: Operand<'_>,
        wanted: [bool; 3],
    ) -> Result<[Option<Arc<Storage>>; 3]> {
        let has_weight = weight.is_some();
        on_backend!(
            "layer_norm",
            [grad, x, weight.unwrap_or(x), stats],
            |be, [g, x, w, s]| be.layer_norm_backward(g, x, has_weight.then_some(w), s, wanted)
        )
    }
}
