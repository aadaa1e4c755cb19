//! Lookup table of `V` vectors of size `D`.

use super::functional::embedding;
use super::module::Module;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::DynTensor;

/// `Embedding<V, D>`: a table of `V` learned vectors of size `D`, indexed by `i64` tokens, as
/// PyTorch's `nn.Embedding(V, D)`.
pub struct Embedding<const V: usize, const D: usize> {
    /// `[V, D]`, initialised from N(0, 1) like PyTorch.
    pub weight: DynTensor,
}

impl<const V: usize, const D: usize> Embedding<V, D> {
    /// A table drawn from N(0, 1) with the global generator, as PyTorch's default.
    pub fn new() -> Result<Self> {
        Ok(Embedding {
            weight: DynTensor::randn(&[V, D], DType::F32)?.requires_grad_()?,
        })
    }

    /// `i64` indices of any shape -> `[indices.., D]`; an index outside `0..V` is an error.
    pub fn forward_dyn(&self, indices: &DynTensor) -> Result<DynTensor> {
        embedding(&self.weight, indices)
    }
}

impl<const V: usize, const D: usize> Module for Embedding<V, D> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        f(&format!("{prefix}weight"), &self.weight);
    }
    fn describe(&self) -> String {
        format!("Embedding({V}, {D})")
    }
}
