//! GraphSAGE convolution with the mean aggregator (Hamilton et al. 2017):
//! `x'_i = W_l mean_{j -> i} x_j + b + W_r x_i`.

use super::super::module::Module;
use super::in_dtype;
use crate::error::Result;
use crate::nn::Linear;
use crate::shape::{D, Dim};
use crate::sparse::Graph;
use crate::tensor::{DynTensor, Tensor};

/// A GraphSAGE layer from `IN` to `OUT` features per node: the mean of a node's in-neighbours'
/// features through one projection (with a bias), plus its own through another. Parameters
/// `lin_l.weight`, `lin_l.bias` and `lin_r.weight`, as PyTorch Geometric's `SAGEConv`.
pub struct SageConv<const IN: usize, const OUT: usize> {
    /// Applied to the neighbours' mean.
    pub lin_l: Linear<IN, OUT>,
    /// Applied to the node itself (no bias).
    pub lin_r: Linear<IN, OUT>,
}

impl<const IN: usize, const OUT: usize> SageConv<IN, OUT> {
    /// A layer initialised as [`Linear`]s are (PyTorch's default, as PyTorch Geometric's).
    pub fn new() -> Result<Self> {
        Ok(SageConv {
            lin_l: Linear::new()?,
            lin_r: Linear::without_bias()?,
        })
    }

    /// Node features `[nodes, IN]` of `graph` to `[nodes, OUT]`; a node with no incoming
    /// edge gets only its own term.
    pub fn forward_dyn(&self, x: &DynTensor, graph: &Graph) -> Result<DynTensor> {
        let mean = in_dtype(graph.mean_matrix()?, x.dtype())?.matmul(x)?;
        self.lin_l
            .forward_dyn(&mean)?
            .add(&self.lin_r.forward_dyn(x)?)
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

impl<const IN: usize, const OUT: usize> Module for SageConv<IN, OUT> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        self.lin_l.visit(&format!("{prefix}lin_l."), f);
        self.lin_r.visit(&format!("{prefix}lin_r."), f);
    }

    fn describe(&self) -> String {
        format!("SageConv({IN}, {OUT}, aggr=mean)")
    }

    fn children(&self) -> Vec<(&'static str, &dyn Module)> {
        vec![("lin_l", &self.lin_l), ("lin_r", &self.lin_r)]
    }
}
