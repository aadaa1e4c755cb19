//! Graph convolution (Kipf and Welling 2017): `X' = D^-1/2 (A + I) D^-1/2 X W + b`.

use super::super::module::Module;
use super::{glorot, in_dtype, zeros};
use crate::error::Result;
use crate::shape::{D, Dim};
use crate::sparse::Graph;
use crate::tensor::{DynTensor, Tensor};

/// A graph convolution from `IN` to `OUT` features per node: each node's new features are
/// the symmetric-normalised sum of its own and its in-neighbours' projected features, plus a
/// bias. Parameters `lin.weight` `[OUT, IN]` and `bias` `[OUT]`, as PyTorch Geometric's
/// `GCNConv`.
pub struct GcnConv<const IN: usize, const OUT: usize> {
    /// The projection, `[OUT, IN]`.
    pub weight: DynTensor,
    /// Added after propagation, `[OUT]`.
    pub bias: Option<DynTensor>,
}

impl<const IN: usize, const OUT: usize> GcnConv<IN, OUT> {
    /// A layer with a Glorot-uniform weight and a zero bias, as PyTorch Geometric
    /// initialises it.
    pub fn new() -> Result<Self> {
        Ok(GcnConv {
            weight: glorot(&[OUT, IN])?,
            bias: Some(zeros(&[OUT])?),
        })
    }

    /// Node features `[nodes, IN]` of `graph` to `[nodes, OUT]`. The propagation matrix is
    /// built on the graph's first use and kept there.
    pub fn forward_dyn(&self, x: &DynTensor, graph: &Graph) -> Result<DynTensor> {
        let projected = x.linear(&self.weight, None)?;
        let propagation = in_dtype(graph.gcn_normalized()?, x.dtype())?;
        let out = propagation.matmul(&projected)?;
        match &self.bias {
            Some(bias) => out.add(bias),
            None => Ok(out),
        }
    }

    /// [`forward_dyn`](Self::forward_dyn) on typed node features.
    pub fn try_forward<N: Dim>(
        &self,
        x: &Tensor<(N, D<IN>)>,
        graph: &Graph,
    ) -> Result<Tensor<(N, D<OUT>)>> {
        Ok(Tensor::wrap(self.forward_dyn(x.as_dyn(), graph)?))
    }
}

impl<const IN: usize, const OUT: usize> Module for GcnConv<IN, OUT> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        f(&format!("{prefix}lin.weight"), &self.weight);
        if let Some(bias) = &self.bias {
            f(&format!("{prefix}bias"), bias);
        }
    }

    fn describe(&self) -> String {
        format!("GcnConv({IN}, {OUT})")
    }
}
