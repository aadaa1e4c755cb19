//! Int8 products of quantized layers whose weights a backend keeps resident.

use super::{Backend, Src};
use crate::backend::kinds::Int8Matrix;
use crate::error::Result;

/// Int8 linear kernels over weights uploaded once per layer.
pub trait Int8: Backend {
    /// A quantized layer's weights as the backend keeps them.
    type Int8Weights: std::fmt::Debug + Send + Sync;

    /// `matrix` uploaded for [`Int8::int8_linear`].
    fn upload_int8(&self, matrix: &Int8Matrix<'_>) -> Result<Self::Int8Weights>;

    /// `x` `[m, cols]` (contiguous f32) times the weights transposed, plus their bias:
    /// `[m, rows]`, each row of `x` quantized with its own scale.
    fn int8_linear(
        &self,
        x: Src<'_, Self::Memory>,
        weights: &Self::Int8Weights,
        m: usize,
    ) -> Result<Self::Memory> {
        let _ = (x, weights, m);
        Err(self.unsupported("QuantizedLinear::forward"))
    }
}
