//! Graph attention (Veličković et al. 2018): each node attends over its in-neighbours and
//! itself, `HEADS` times, with scores `leaky_relu(a_src . W x_j + a_dst . W x_i)` softmaxed
//! over the node's incoming edges.

use super::super::module::Module;
use super::{glorot, zeros};
use crate::error::Result;
use crate::nn::Dropout;
use crate::shape::{D, Dim};
use crate::sparse::{CsrMatrix, Graph};
use crate::tensor::{DynTensor, Tensor};

/// Slope of the scores' leaky ReLU, as in the paper and PyTorch Geometric.
const NEGATIVE_SLOPE: f64 = 0.2;

/// A graph attention layer from `IN` features to `HEADS` heads of `OUT` features per node,
/// concatenated: `[nodes, HEADS * OUT]`. Parameters `lin.weight` `[HEADS * OUT, IN]`,
/// `att_src` and `att_dst` `[1, HEADS, OUT]` and `bias` `[HEADS * OUT]`, as PyTorch
/// Geometric's `GATConv(IN, OUT, heads=HEADS)`. Self-loops are added where missing; the
/// attention weights go through dropout in training mode.
pub struct GatConv<const IN: usize, const OUT: usize, const HEADS: usize> {
    /// The projection of every node's features, `[HEADS * OUT, IN]`.
    pub weight: DynTensor,
    /// Scores' weights for the source node's projection, `[1, HEADS, OUT]`.
    pub att_src: DynTensor,
    /// Scores' weights for the target node's projection, `[1, HEADS, OUT]`.
    pub att_dst: DynTensor,
    /// Added to the concatenated heads, `[HEADS * OUT]`.
    pub bias: Option<DynTensor>,
    /// Dropout of the attention weights (PyTorch Geometric's `dropout`).
    pub attention_dropout: Dropout,
}

impl<const IN: usize, const OUT: usize, const HEADS: usize> GatConv<IN, OUT, HEADS> {
    /// A layer with Glorot-uniform weights, a zero bias and no attention dropout, as
    /// PyTorch Geometric initialises it.
    pub fn new() -> Result<Self> {
        Self::with_dropout(0.0)
    }

    /// A layer whose attention weights drop with probability `p` in training mode.
    pub fn with_dropout(p: f64) -> Result<Self> {
        Ok(GatConv {
            weight: glorot(&[HEADS * OUT, IN])?,
            att_src: glorot(&[1, HEADS, OUT])?,
            att_dst: glorot(&[1, HEADS, OUT])?,
            bias: Some(zeros(&[HEADS * OUT])?),
            attention_dropout: Dropout::new(p)?,
        })
    }

    /// Node features `[nodes, IN]` of `graph` to `[nodes, HEADS * OUT]`.
    pub fn forward_dyn(&self, x: &DynTensor, graph: &Graph) -> Result<DynTensor> {
        let graph = graph.with_self_loops()?;
        let nodes = graph.nodes();
        let projected = x
            .linear(&self.weight, None)?
            .reshape(&[nodes, HEADS, OUT])?;
        let score_of = |att: &DynTensor| projected.mul(att)?.sum(&[-1], false);
        let (from_source, from_target) = (score_of(&self.att_src)?, score_of(&self.att_dst)?);
        let scores = graph
            .gather_sources(&from_source)?
            .add(&graph.gather_targets(&from_target)?)?
            .leaky_relu(NEGATIVE_SLOPE)?;
        let weights = self
            .attention_dropout
            .forward_dyn(&graph.softmax(&scores)?)?;
        // Each head is one weighted sum over the edges: a product with the sparse matrix of
        // that head's weights, so no [edges, HEADS, OUT] messages are ever written.
        let heads = (0..HEADS)
            .map(|h| {
                let head_weights = weights.narrow(1, h, 1)?.reshape(&[graph.edges()])?;
                let matrix = CsrMatrix::from_pattern(graph.adjacency().clone(), head_weights)?;
                matrix.matmul(&projected.narrow(1, h, 1)?.reshape(&[nodes, OUT])?)
            })
            .collect::<Result<Vec<_>>>()?;
        let out = DynTensor::cat(&heads.iter().collect::<Vec<_>>(), 1)?;
        match &self.bias {
            Some(bias) => out.add(bias),
            None => Ok(out),
        }
    }

    /// [`forward_dyn`](Self::forward_dyn) on typed node features; the output's width is
    /// `HEADS * OUT`, given as `OUT_ALL` (checked).
    pub fn try_forward<N: Dim, const OUT_ALL: usize>(
        &self,
        x: &Tensor<(N, D<IN>)>,
        graph: &Graph,
    ) -> Result<Tensor<(N, D<OUT_ALL>)>> {
        if OUT_ALL != HEADS * OUT {
            return Err(crate::Error::InvalidArgument {
                op: "GatConv",
                message: format!(
                    "{HEADS} heads of {OUT} features give {} per node, not {OUT_ALL}",
                    HEADS * OUT
                ),
            });
        }
        Ok(Tensor::wrap(self.forward_dyn(x.as_dyn(), graph)?))
    }
}

impl<const IN: usize, const OUT: usize, const HEADS: usize> Module for GatConv<IN, OUT, HEADS> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        f(&format!("{prefix}att_src"), &self.att_src);
        f(&format!("{prefix}att_dst"), &self.att_dst);
        if let Some(bias) = &self.bias {
            f(&format!("{prefix}bias"), bias);
        }
        f(&format!("{prefix}lin.weight"), &self.weight);
    }

    fn set_training(&self, training: bool) {
        self.attention_dropout.set_training(training);
    }

    fn training(&self) -> Option<bool> {
        self.attention_dropout.training()
    }

    fn describe(&self) -> String {
        format!(
            "GatConv({IN}, {OUT}, heads={HEADS}, dropout={})",
            self.attention_dropout.p
        )
    }
}
