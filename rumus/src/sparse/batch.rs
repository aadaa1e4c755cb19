//! Several small graphs as one: their nodes numbered one after another and their edges
//! shifted to match (a block-diagonal adjacency), so one pass of a graph layer runs them all,
//! and a membership pattern (graphs x nodes) for pooling each graph's nodes.

use super::Graph;
use super::pattern::Pattern;
use crate::device::Device;
use crate::error::Result;
use crate::tensor::DynTensor;

/// Graphs stacked into one graph with a record of which node belongs to which graph
/// (PyTorch Geometric's `Batch`). Node features are stacked the same way, in the order the
/// graphs were given: `DynTensor::cat(&[x_0, x_1, ...], 0)`.
pub struct GraphBatch {
    graph: Graph,
    /// Graph `g`'s nodes are `offsets[g]..offsets[g + 1]`.
    offsets: Vec<usize>,
    /// `[graphs, nodes]`: row `g` holds graph `g`'s nodes, in order.
    membership: Pattern,
}

impl GraphBatch {
    /// The graphs as one, on the first graph's device (all must share it).
    pub fn new(graphs: &[&Graph]) -> Result<GraphBatch> {
        let device = graphs.first().map_or(Device::Cpu, |g| g.device());
        let mut offsets = vec![0usize];
        let (mut sources, mut targets) = (Vec::new(), Vec::new());
        for graph in graphs {
            let shift = *offsets.last().unwrap_or(&0) as i64;
            let pattern = graph.adjacency();
            let ptr = pattern.row_ptr();
            for (target, window) in ptr.windows(2).enumerate() {
                let entries = window[0] as usize..window[1] as usize;
                for &source in &pattern.col_indices()[entries] {
                    sources.push(source + shift);
                    targets.push(target as i64 + shift);
                }
            }
            offsets.push(offsets.last().unwrap_or(&0) + graph.nodes());
        }
        let nodes = *offsets.last().unwrap_or(&0);
        let graph = Graph::from_edges(&sources, &targets, nodes)?.to(&device)?;
        let node_ids: Vec<i64> = (0..nodes as i64).collect();
        let row_ptr = offsets.iter().map(|&o| o as i64).collect();
        let membership = Pattern::from_csr(row_ptr, node_ids, (graphs.len(), nodes), &device)?;
        Ok(GraphBatch {
            graph,
            offsets,
            membership,
        })
    }

    /// The stacked graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Number of graphs.
    pub fn graphs(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Graph `g`'s nodes are `node_offsets()[g]..node_offsets()[g + 1]` of the stack.
    pub fn node_offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// `[graphs, nodes]`: row `g` holds graph `g`'s nodes, what per-graph pooling reduces.
    pub fn membership(&self) -> &Pattern {
        &self.membership
    }

    /// Each node's graph, an `i64` tensor `[nodes]` (PyTorch Geometric's `batch`).
    pub fn assignment(&self) -> &DynTensor {
        self.membership.row_index()
    }
}
