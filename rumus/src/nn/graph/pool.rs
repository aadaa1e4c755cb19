//! Pooling each graph's nodes into one vector per graph (the readout of graph
//! classification): PyTorch Geometric's `global_add_pool`, `global_mean_pool` and
//! `global_max_pool`.

use crate::error::Result;
use crate::sparse::{Aggregation, GraphBatch, aggregate};
use crate::tensor::DynTensor;

/// The node features `x` (`[nodes, ...]` of the batch's stacked graph) of each graph
/// combined by `how`: `[graphs, ...]`. A graph with no nodes gets 0.
pub fn global_pool(x: &DynTensor, batch: &GraphBatch, how: Aggregation) -> Result<DynTensor> {
    let membership = batch.membership();
    // Row g's entries are graph g's nodes in order, so the "messages" are the nodes'
    // features themselves, read in that order.
    let messages = x.index_select(0, membership.col_index())?;
    aggregate(membership, &messages, how)
}
