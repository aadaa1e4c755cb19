//! The three networks of the `gnn` example, with the recipes of their papers (and of
//! PyTorch Geometric's examples, which `tests/fixtures/make_gnn_reference.py` runs on the
//! same split for comparison).

use rumus::data::GraphDatasetBatch;
use rumus::nn::{Dropout, GatConv, GcnConv, GinConv, Linear, SageConv};
use rumus::prelude::*;
use rumus::sparse::{Aggregation, Graph};

/// Kipf and Welling's GCN: dropout 0.5, 16 hidden units.
#[model]
pub struct Gcn {
    conv1: GcnConv<1433, 16>,
    conv2: GcnConv<16, 7>,
    #[dropout(p = 0.5)]
    drop: Dropout,
}

impl Gcn {
    pub fn logits(&self, x: &DynTensor, graph: &Graph) -> rumus::Result<DynTensor> {
        let h = self
            .conv1
            .forward_dyn(&self.drop.forward_dyn(x)?, graph)?
            .relu()?;
        self.conv2.forward_dyn(&self.drop.forward_dyn(&h)?, graph)
    }
}

/// Veličković et al.'s GAT: 8 heads of 8, then one head of the classes; dropout 0.6 on the
/// features and on the attention weights.
#[model]
pub struct Gat {
    conv1: GatConv<1433, 8, 8>,
    conv2: GatConv<64, 7, 1>,
    #[dropout(p = 0.6)]
    drop: Dropout,
}

impl Gat {
    pub fn with_attention_dropout() -> rumus::Result<Gat> {
        Ok(Gat {
            conv1: GatConv::with_dropout(0.6)?,
            conv2: GatConv::with_dropout(0.6)?,
            drop: Dropout::new(0.6)?,
        })
    }

    pub fn logits(&self, x: &DynTensor, graph: &Graph) -> rumus::Result<DynTensor> {
        let h = elu(&self.conv1.forward_dyn(&self.drop.forward_dyn(x)?, graph)?)?;
        self.conv2.forward_dyn(&self.drop.forward_dyn(&h)?, graph)
    }
}

/// `x` where positive, `exp(x) - 1` elsewhere.
fn elu(x: &DynTensor) -> rumus::Result<DynTensor> {
    x.relu()?
        .add(&x.clamp(f64::NEG_INFINITY, 0.0)?.exp()?.add_scalar(-1.0)?)
}

/// Xu et al.'s GIN for graph classification: three GIN layers of 32, each graph's nodes
/// summed, then a two-layer classifier.
#[model]
pub struct Gin {
    conv1: GinConv<7, 32>,
    conv2: GinConv<32, 32>,
    conv3: GinConv<32, 32>,
    head1: Linear<32, 32>,
    head2: Linear<32, 2>,
    #[dropout(p = 0.5)]
    drop: Dropout,
}

impl Gin {
    pub fn logits(&self, data: &GraphDatasetBatch) -> rumus::Result<DynTensor> {
        let graph = data.batch.graph();
        let h = self.conv1.forward_dyn(&data.features, graph)?.relu()?;
        let h = self.conv2.forward_dyn(&h, graph)?.relu()?;
        let h = self.conv3.forward_dyn(&h, graph)?.relu()?;
        let pooled = rumus::nn::global_pool(&h, &data.batch, Aggregation::Sum)?;
        let hidden = self.head1.forward_dyn(&pooled)?.relu()?;
        self.head2.forward_dyn(&self.drop.forward_dyn(&hidden)?)
    }
}

/// GraphSAGE with the mean aggregator: two layers of 64, trained on sampled neighbourhoods.
#[model]
pub struct Sage {
    conv1: SageConv<1433, 64>,
    conv2: SageConv<64, 7>,
    #[dropout(p = 0.5)]
    drop: Dropout,
}

impl Sage {
    pub fn logits(&self, x: &DynTensor, graph: &Graph) -> rumus::Result<DynTensor> {
        let h = self
            .conv1
            .forward_dyn(&self.drop.forward_dyn(x)?, graph)?
            .relu()?;
        self.conv2.forward_dyn(&self.drop.forward_dyn(&h)?, graph)
    }
}
