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
            eprintln!("usage: bench_gnn EDGES NODES [cpu|gpu|cuda]");
            std::process::exit(2);
        }
    };
    let device = Device::named(args.get(3).map_or("cpu", String::as_str))?;
    // Every timed run waits for the device, so a GPU's queued work is counted.
    let timed = |warmup, reps, f: &mut dyn FnMut()| {
        median_ms(warmup, reps, || {
            f();
            device.synchronize().expect("device wait");
        })
    };
    let (sources, targets) = read_edges(path)?;
    let graph = Graph::from_edges(&sources, &targets, nodes)?.to(&device)?;
    manual_seed(0);
    let x = DynTensor::randn(&[nodes, FEATURES], DType::F32)?.to(&device)?;
    let labels = DynTensor::from_vec(
        (0..nodes as i64).map(|i| i % CLASSES as i64).collect(),
        &[nodes],
    )?
    .to(&device)?;

    let adjacency = graph.gcn_normalized()?;
    let spmm = timed(3, 21, &mut || {
        adjacency.matmul(&x).expect("spmm");
    });
    println!("spmm {spmm:.4}");

    let mut layer = GcnConv::<64, 64>::new()?;
    layer.to_device(device.clone())?;
    let x_grad = x.clone().requires_grad_()?;
    let mut conv = || {
        let out = layer.forward_dyn(&x_grad, &graph).expect("forward");
        drop(out.sum_all().expect("sum").backward().expect("backward"));
    };
    println!("gcn_conv_fwd_bwd {:.4}", timed(3, 15, &mut conv));

    let mut gcn = Gcn::new()?;
    gcn.to_device(device.clone())?;
    let mut optimizer = Adam::new(gcn.parameters(), AdamConfig::adam())?;
    let gcn_epoch = timed(2, 11, &mut || {
        epoch(&mut optimizer, gcn.logits(&x, &graph), &labels).expect("epoch");
    });
    println!("gcn_epoch {gcn_epoch:.4}");

    let mut gat = Gat::new()?;
    gat.to_device(device.clone())?;
    let mut optimizer = Adam::new(gat.parameters(), AdamConfig::adam())?;
    let gat_epoch = timed(1, 5, &mut || {
        epoch(&mut optimizer, gat.logits(&x, &graph), &labels).expect("epoch");
    });
    println!("gat_epoch {gat_epoch:.4}");

    if let Device::Cuda(cuda) = &device {
        // GPU time of each kernel of one GAT epoch: where a GPU epoch goes.
        cuda.profile_kernels(true)?;
        epoch(&mut optimizer, gat.logits(&x, &graph), &labels)?;
        device.synchronize()?;
        for (entry, time) in cuda.kernel_times()? {
            eprintln!(
                "kernel {entry} {} {:.3} ms",
                time.dispatches,
                time.seconds * 1e3
            );
        }
        cuda.profile_kernels(false)?;
    }
    Ok(())
}
