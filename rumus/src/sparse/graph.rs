//! A graph for message passing: its edges as the sparse adjacency `A[target, source]`, so
//! that `A x` sums each node's incoming messages (PyTorch Geometric's default
//! source-to-target flow), and the normalised forms the graph layers use, each built once
//! and kept.

use std::sync::OnceLock;

use super::coo::index_pairs;
use super::pattern::{Pattern, invalid};
use super::{Aggregation, CsrMatrix, aggregate, softmax};
use crate::device::Device;
use crate::error::Result;
use crate::tensor::DynTensor;

/// A directed graph of `nodes` nodes: edge `e` runs from `sources[e]` to `targets[e]`.
///
/// Edges are kept in target order (the adjacency's row order): per-edge tensors passed to
/// [`aggregate`](Graph::aggregate) and [`softmax`](Graph::softmax), and the ones
/// [`gather_sources`](Graph::gather_sources) returns, follow [`sources`](Graph::sources) /
/// [`targets`](Graph::targets). Repeated edges are kept (they count twice).
///
/// ```
/// use rumus::sparse::{Aggregation, Graph};
/// use rumus::DynTensor;
///
/// // 0 -> 2, 1 -> 2, 2 -> 0
/// let graph = Graph::from_edges(&[0, 1, 2], &[2, 2, 0], 3)?;
/// let x = DynTensor::from_vec(vec![1.0f32, 2.0, 4.0], &[3, 1])?;
/// let messages = graph.gather_sources(&x)?;
/// let summed = graph.aggregate(&messages, Aggregation::Sum)?;
/// assert_eq!(summed.to_vec::<f32>()?, vec![4.0, 0.0, 3.0]);
/// # Ok::<(), rumus::Error>(())
/// ```
pub struct Graph {
    nodes: usize,
    adjacency: Pattern,
    self_looped: OnceLock<Box<Graph>>,
    gcn: OnceLock<CsrMatrix>,
    sum: OnceLock<CsrMatrix>,
    mean: OnceLock<CsrMatrix>,
}

impl Graph {
    /// The graph of edges `sources[e] -> targets[e]` over `nodes` nodes, on the CPU.
    ///
    /// Errors name the first edge with a node outside `0..nodes` (negative included), or
    /// lengths that differ.
    pub fn from_edges(sources: &[i64], targets: &[i64], nodes: usize) -> Result<Graph> {
        let (adjacency, _) = Pattern::from_entries(targets, sources, (nodes, nodes), &Device::Cpu)?;
        Ok(Graph::from_adjacency(adjacency))
    }

    /// The graph of an `i64` edge index `[2, edges]` (sources, then targets), as PyTorch
    /// Geometric's `edge_index`.
    pub fn from_edge_index(edge_index: &DynTensor, nodes: usize) -> Result<Graph> {
        let (sources, targets) = index_pairs(edge_index, "an edge index")?;
        let graph = Graph::from_edges(&sources, &targets, nodes)?;
        graph.to(&edge_index.device())
    }

    /// The graph whose adjacency (`[targets, sources]`, square) has `pattern`.
    pub fn from_adjacency(adjacency: Pattern) -> Graph {
        Graph {
            nodes: adjacency.shape().0,
            adjacency,
            self_looped: OnceLock::new(),
            gcn: OnceLock::new(),
            sum: OnceLock::new(),
            mean: OnceLock::new(),
        }
    }

    /// Number of nodes.
    pub fn nodes(&self) -> usize {
        self.nodes
    }

    /// Number of edges.
    pub fn edges(&self) -> usize {
        self.adjacency.nnz()
    }

    /// The adjacency's pattern: row `i` holds node `i`'s incoming edges.
    pub fn adjacency(&self) -> &Pattern {
        &self.adjacency
    }

    /// Each edge's source node, an `i64` tensor in edge order.
    pub fn sources(&self) -> &DynTensor {
        self.adjacency.col_index()
    }

    /// Each edge's target node, an `i64` tensor in edge order.
    pub fn targets(&self) -> &DynTensor {
        self.adjacency.row_index()
    }

    /// The number of edges into each node.
    pub fn in_degrees(&self) -> Vec<usize> {
        self.adjacency.row_counts()
    }

    /// The device of its index tensors.
    pub fn device(&self) -> Device {
        self.adjacency.device()
    }

    /// The same graph with its index tensors on `device`.
    pub fn to(&self, device: &Device) -> Result<Graph> {
        Ok(Graph::from_adjacency(self.adjacency.to(device)?))
    }

    /// The features of each edge's source, `[edges, ...]` from node features `[nodes, ...]`.
    pub fn gather_sources(&self, x: &DynTensor) -> Result<DynTensor> {
        self.check_nodes(x)?;
        x.index_select(0, self.sources())
    }

    /// The features of each edge's target, `[edges, ...]` from node features `[nodes, ...]`.
    pub fn gather_targets(&self, x: &DynTensor) -> Result<DynTensor> {
        self.check_nodes(x)?;
        x.index_select(0, self.targets())
    }

    /// Per-edge messages (`[edges, ...]`, in edge order) combined at each target:
    /// `[nodes, ...]`; a node with no incoming edge gets 0.
    pub fn aggregate(&self, messages: &DynTensor, how: Aggregation) -> Result<DynTensor> {
        aggregate(&self.adjacency, messages, how)
    }

    /// Softmax of per-edge scores (`[edges, ...]`) over each node's incoming edges.
    pub fn softmax(&self, scores: &DynTensor) -> Result<DynTensor> {
        softmax(&self.adjacency, scores)
    }

    /// This graph plus an edge `i -> i` for every node that has none (existing self-loops
    /// are kept once as they are), built once and kept: what GCN and GAT layers propagate
    /// over (PyTorch Geometric's `add_remaining_self_loops`).
    pub fn with_self_loops(&self) -> Result<&Graph> {
        if let Some(graph) = self.self_looped.get() {
            return Ok(graph);
        }
        let mut targets = Vec::with_capacity(self.edges() + self.nodes);
        let mut sources = Vec::with_capacity(self.edges() + self.nodes);
        let row_ptr = self.adjacency.row_ptr();
        let cols = self.adjacency.col_indices();
        for i in 0..self.nodes {
            let incoming = &cols[row_ptr[i] as usize..row_ptr[i + 1] as usize];
            if !incoming.contains(&(i as i64)) {
                targets.push(i as i64);
                sources.push(i as i64);
            }
            targets.extend(std::iter::repeat_n(i as i64, incoming.len()));
            sources.extend_from_slice(incoming);
        }
        let (pattern, _) =
            Pattern::from_entries(&targets, &sources, (self.nodes, self.nodes), &self.device())?;
        Ok(self
            .self_looped
            .get_or_init(|| Box::new(Graph::from_adjacency(pattern))))
    }

    /// The GCN propagation matrix `D^-1/2 (A + I) D^-1/2` in f32 (self-loops added where
    /// missing, `D` the in-degrees with them), built once and kept: Kipf and Welling's
    /// symmetric normalisation, as PyTorch Geometric's `gcn_norm`.
    pub fn gcn_normalized(&self) -> Result<&CsrMatrix> {
        if let Some(matrix) = self.gcn.get() {
            return Ok(matrix);
        }
        let looped = self.with_self_loops()?.adjacency();
        let inv_sqrt: Vec<f32> = looped
            .row_counts()
            .iter()
            .map(|&d| if d == 0 { 0.0 } else { 1.0 / (d as f32).sqrt() })
            .collect();
        let matrix = weighted(looped, |i, j| inv_sqrt[i] * inv_sqrt[j])?;
        Ok(self.gcn.get_or_init(|| matrix))
    }

    /// The adjacency with every value 1 in f32, built once and kept: `A x` sums each node's
    /// incoming messages.
    pub fn sum_matrix(&self) -> Result<&CsrMatrix> {
        if let Some(matrix) = self.sum.get() {
            return Ok(matrix);
        }
        let matrix = weighted(&self.adjacency, |_, _| 1.0)?;
        Ok(self.sum.get_or_init(|| matrix))
    }

    /// The adjacency with each node's incoming edges weighted `1 / in-degree` in f32, built
    /// once and kept: `A x` averages each node's incoming messages (0 with none).
    pub fn mean_matrix(&self) -> Result<&CsrMatrix> {
        if let Some(matrix) = self.mean.get() {
            return Ok(matrix);
        }
        let counts = self.in_degrees();
        let matrix = weighted(&self.adjacency, |i, _| 1.0 / counts[i] as f32)?;
        Ok(self.mean.get_or_init(|| matrix))
    }

    fn check_nodes(&self, x: &DynTensor) -> Result<()> {
        if x.rank() == 0 || x.dims()[0] != self.nodes {
            return Err(invalid(format!(
                "node features of a {}-node graph are [{}, ...], got {:?}",
                self.nodes,
                self.nodes,
                x.dims()
            )));
        }
        Ok(())
    }
}

/// `pattern` with the value `weight(row, column)` at each entry, in f32.
fn weighted(pattern: &Pattern, weight: impl Fn(usize, usize) -> f32) -> Result<CsrMatrix> {
    let ptr = pattern.row_ptr();
    let cols = pattern.col_indices();
    let mut values = Vec::with_capacity(pattern.nnz());
    for i in 0..ptr.len() - 1 {
        let entries = ptr[i] as usize..ptr[i + 1] as usize;
        values.extend(cols[entries].iter().map(|&j| weight(i, j as usize)));
    }
    let values = DynTensor::from_vec(values, &[pattern.nnz()])?.to(&pattern.device())?;
    CsrMatrix::from_pattern(pattern.clone(), values)
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Graph({} nodes, {} edges)", self.nodes, self.edges())
    }
}
