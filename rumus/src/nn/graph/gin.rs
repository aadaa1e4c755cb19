//! Graph isomorphism network convolution (Xu et al. 2019):
//! `x'_i = MLP((1 + eps) x_i + sum_{j -> i} x_j)`, as discriminative as the
//! Weisfeiler-Lehman test when the MLP is.

use super::super::module::Module;
use super::in_dtype;
use crate::dtype::DType;
use crate::error::Result;
use crate::nn::Linear;
use crate::shape::{D, Dim};
use crate::sparse::Graph;
use crate::tensor::{DynTensor, Tensor};

/// A GIN layer from `IN` to `OUT` features per node, its MLP `Linear<IN, OUT>`, ReLU,
/// `Linear<OUT, OUT>`. Parameters `nn.0.*` and `nn.2.*` and `eps`, as PyTorch Geometric's
/// `GINConv(Sequential(Linear, ReLU, Linear))`: `eps` is a parameter when trained, else a
/// buffer.
pub struct GinConv<const IN: usize, const OUT: usize> {
    /// The MLP's first layer.
    pub first: Linear<IN, OUT>,
    /// The MLP's second layer, after a ReLU.
    pub second: Linear<OUT, OUT>,
    /// The weight of a node's own features beyond 1, `[1]`.
    pub eps: DynTensor,
    train_eps: bool,
}

impl<const IN: usize, const OUT: usize> GinConv<IN, OUT> {
    /// A layer with a fixed `eps` of 0 (the GIN-0 of the paper).
    pub fn new() -> Result<Self> {
        Ok(GinConv {
            first: Linear::new()?,
            second: Linear::new()?,
            eps: DynTensor::zeros(&[1], DType::F32)?,
            train_eps: false,
        })
    }

    /// A layer whose `eps` starts at `eps` and, if `train`, is learnt.
    pub fn with_eps(eps: f64, train: bool) -> Result<Self> {
        let mut layer = Self::new()?;
        layer.eps = DynTensor::full(&[1], eps, DType::F32)?;
        if train {
            layer.eps = layer.eps.requires_grad_()?;
        }
        layer.train_eps = train;
        Ok(layer)
    }

    /// Node features `[nodes, IN]` of `graph` to `[nodes, OUT]`.
    pub fn forward_dyn(&self, x: &DynTensor, graph: &Graph) -> Result<DynTensor> {
        let neighbours = in_dtype(graph.sum_matrix()?, x.dtype())?.matmul(x)?;
        let own = x.mul(&self.eps.to_dtype(x.dtype())?.add_scalar(1.0)?)?;
        let hidden = self.first.forward_dyn(&own.add(&neighbours)?)?.relu()?;
        self.second.forward_dyn(&hidden)
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

impl<const IN: usize, const OUT: usize> Module for GinConv<IN, OUT> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        if self.train_eps {
            f(&format!("{prefix}eps"), &self.eps);
        }
        self.first.visit(&format!("{prefix}nn.0."), f);
        self.second.visit(&format!("{prefix}nn.2."), f);
    }

    fn visit_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        if !self.train_eps {
            f(&format!("{prefix}eps"), &self.eps);
        }
    }

    fn describe(&self) -> String {
        format!("GinConv({IN}, {OUT}, train_eps={})", self.train_eps)
    }

    fn children(&self) -> Vec<(&'static str, &dyn Module)> {
        vec![("nn.0", &self.first), ("nn.2", &self.second)]
    }
}
