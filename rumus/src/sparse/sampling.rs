//! Neighbour sampling for graphs too large to propagate over whole (GraphSAGE, Hamilton et
//! al. 2017): from a batch of seed nodes, a fixed number of each node's incoming edges per
//! layer, drawn without replacement, so a mini-batch's subgraph stays small whatever the
//! degrees. The draws come from a seeded generator: the same seed gives the same subgraph.

use std::collections::HashMap;

use super::Graph;
use super::pattern::invalid;
use crate::error::Result;
use crate::rng::Generator;
use crate::tensor::DynTensor;

/// The subgraph a [`sample_neighbors`] call drew: its own graph over local node numbers,
/// and which node of the full graph each local node is.
pub struct SampledSubgraph {
    /// The sampled edges between the local nodes.
    pub graph: Graph,
    /// The full graph's number of each local node: the seeds first, in their order, then
    /// the nodes each hop reached, in the order they were reached.
    pub nodes: Vec<i64>,
    /// How many of the first local nodes are the seeds (whose outputs a loss reads).
    pub seeds: usize,
}

impl SampledSubgraph {
    /// The local nodes' rows of the full graph's node features `x` (`[nodes, ...]`).
    pub fn gather(&self, x: &DynTensor) -> Result<DynTensor> {
        let index = DynTensor::from_slice(&self.nodes, &[self.nodes.len()])?.to(&x.device())?;
        x.index_select(0, &index)
    }
}

/// A subgraph around `seeds`: for each entry of `fanouts` (one per layer, nearest first),
/// up to that many incoming edges of every node reached so far at the previous hop, drawn
/// without replacement by `generator` (every incoming edge when a node has fewer). As PyTorch
/// Geometric's `NeighborLoader`, layer `l` of a model over the subgraph then sees exactly
/// the neighbourhood it would see on the full graph, sampled.
///
/// Errors: a seed outside the graph, a repeated seed, no fanouts.
pub fn sample_neighbors(
    graph: &Graph,
    seeds: &[usize],
    fanouts: &[usize],
    generator: &mut Generator,
) -> Result<SampledSubgraph> {
    if fanouts.is_empty() {
        return Err(invalid(
            "neighbour sampling needs one fanout per layer, got none".into(),
        ));
    }
    let mut local: HashMap<i64, i64> = HashMap::with_capacity(seeds.len() * 4);
    let mut nodes = Vec::with_capacity(seeds.len() * 4);
    for &seed in seeds {
        if seed >= graph.nodes() {
            return Err(invalid(format!(
                "seed node {seed} is outside the graph's {} nodes",
                graph.nodes()
            )));
        }
        if local.insert(seed as i64, nodes.len() as i64).is_some() {
            return Err(invalid(format!("seed node {seed} is given twice")));
        }
        nodes.push(seed as i64);
    }
    let adjacency = graph.adjacency();
    let (row_ptr, cols) = (adjacency.row_ptr(), adjacency.col_indices());
    let (mut sources, mut targets) = (Vec::new(), Vec::new());
    let mut frontier: Vec<i64> = nodes.clone();
    for &fanout in fanouts {
        let mut next = Vec::new();
        for &node in &frontier {
            let incoming =
                &cols[row_ptr[node as usize] as usize..row_ptr[node as usize + 1] as usize];
            for source in draw(incoming, fanout, generator) {
                let id = *local.entry(source).or_insert_with(|| {
                    nodes.push(source);
                    next.push(source);
                    nodes.len() as i64 - 1
                });
                sources.push(id);
                targets.push(local[&node]);
            }
        }
        frontier = next;
    }
    let sampled = Graph::from_edges(&sources, &targets, nodes.len())?.to(&graph.device())?;
    Ok(SampledSubgraph {
        graph: sampled,
        nodes,
        seeds: seeds.len(),
    })
}

/// `count` of `items` drawn without replacement (all of them when there are fewer): the
/// first `count` places of a partial Fisher-Yates shuffle.
fn draw(items: &[i64], count: usize, generator: &mut Generator) -> Vec<i64> {
    let mut pool = items.to_vec();
    if pool.len() <= count {
        return pool;
    }
    for i in 0..count {
        let j = i + (generator.next_u64() % (pool.len() - i) as u64) as usize;
        pool.swap(i, j);
    }
    pool.truncate(count);
    pool
}
