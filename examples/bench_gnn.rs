//! Graph workloads timed by `tests/bench/compare_gnn.py`, which runs the same workloads in
//! PyTorch and PyTorch Geometric on the same graph in the same run and prints ratios. Prints
//! one `name milliseconds` line per workload (median of repetitions after warm-up). Thread
//! count: `RAYON_NUM_THREADS`.
//!
//! ```text
//! cargo run --release --example bench_gnn -- EDGES NODES [cpu|gpu|cuda]
//! ```
//!
//! `EDGES` is a file of little-endian `i64`s: the sources, then the targets, of every edge.

use rumus::nn::{
    CrossEntropyOptions, GatConv, GcnConv, Module, cross_entropy, functional::dropout,
};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;
use rumus::sparse::Graph;

#[path = "common/median.rs"]
mod median;
use median::median_ms;

const FEATURES: usize = 64;
const CLASSES: usize = 8;

/// Two graph convolutions, 64 -> 64 -> 8, ReLU and dropout 0.5 between.
#[model]
struct Gcn {
    conv1: GcnConv<64, 64>,
    conv2: GcnConv<64, 8>,
}

impl Gcn {
    fn logits(&self, x: &DynTensor, graph: &Graph) -> rumus::Result<DynTensor> {
        let h = self.conv1.forward_dyn(x, graph)?.relu()?;
        self.conv2.forward_dyn(&dropout(&h, 0.5, true)?, graph)
    }
}

/// Two graph attention layers, 8 heads of 8 then one head of 8 classes, ReLU between.
#[model]
struct Gat {
    conv1: GatConv<64, 8, 8>,
    conv2: GatConv<64, 8, 1>,
}

impl Gat {
    fn logits(&self, x: &DynTensor, graph: &Graph) -> rumus::Result<DynTensor> {
        let h = self.conv1.forward_dyn(x, graph)?.relu()?;
        self.conv2.forward_dyn(&h, graph)
    }
}

fn read_edges(path: &str) -> rumus::Result<(Vec<i64>, Vec<i64>)> {
    let bytes = std::fs::read(path).map_err(|e| rumus::Error::Io {
        path: path.into(),
        message: e.to_string(),
    })?;
    let values: Vec<i64> = bytes
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes")))
        .collect();
    let (sources, targets) = values.split_at(values.len() / 2);
    Ok((sources.to_vec(), targets.to_vec()))
}

/// One full-batch training epoch: forward, cross-entropy, backward, Adam.
fn epoch(
    optimizer: &mut Adam,
    logits: rumus::Result<DynTensor>,
    labels: &DynTensor,
) -> rumus::Result<()> {
    let loss = cross_entropy(&logits?, labels, &CrossEntropyOptions::default())?;
    optimizer.step(&mut loss.backward()?)
}

fn main() -> rumus::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (path, nodes) = match args.as_slice() {
        [_, path, nodes, ..] => (path.as_str(), nodes.parse::<usize>().expect("NODES")),
        _ => {
            eprintln!("usage: bench_gnn EDGES NODES");
            std::process::exit(2);
        }
    };
    let (sources, targets) = read_edges(path)?;
    let graph = Graph::from_edges(&sources, &targets, nodes)?;
    manual_seed(0);
    let x = DynTensor::randn(&[nodes, FEATURES], DType::F32)?;
    let labels = DynTensor::from_vec(
        (0..nodes as i64).map(|i| i % CLASSES as i64).collect(),
        &[nodes],
    )?;

    let adjacency = graph.gcn_normalized()?;
    println!(
        "spmm {:.4}",
        median_ms(3, 21, || {
            adjacency.matmul(&x).expect("spmm");
        })
    );

    let layer = GcnConv::<64, 64>::new()?;
    let x_grad = x.clone().requires_grad_()?;
    println!(
        "gcn_conv_fwd_bwd {:.4}",
        median_ms(3, 15, || {
            let out = layer.forward_dyn(&x_grad, &graph).expect("forward");
            drop(out.sum_all().expect("sum").backward().expect("backward"));
        })
    );

    let gcn = Gcn::new()?;
    let mut optimizer = Adam::new(gcn.parameters(), AdamConfig::adam())?;
    println!(
        "gcn_epoch {:.4}",
        median_ms(2, 11, || {
            epoch(&mut optimizer, gcn.logits(&x, &graph), &labels).expect("epoch");
        })
    );

    let gat = Gat::new()?;
    let mut optimizer = Adam::new(gat.parameters(), AdamConfig::adam())?;
    println!(
        "gat_epoch {:.4}",
        median_ms(1, 5, || {
            epoch(&mut optimizer, gat.logits(&x, &graph), &labels).expect("epoch");
        })
    );
    Ok(())
}
