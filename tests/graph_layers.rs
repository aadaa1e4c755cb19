//! Sparse products, message passing and the graph layers against PyTorch and PyTorch
//! Geometric: outputs and the gradients of inputs and parameters, in f64, and PyTorch
//! Geometric's state-dict names loading strictly. Data: tests/fixtures/graph_layers.txt,
//! written by tests/fixtures/make_graph_fixtures.py.

mod common;

use std::collections::BTreeMap;

use common::fixture_file::{FixtureTensor, assert_close, read_cases};
use rumus::autograd::grad_with;
use rumus::nn::{GatConv, GcnConv, GinConv, Module, SageConv, StateDict};
use rumus::sparse::{Aggregation, CooMatrix, Graph};
use rumus::{DynTensor, Result};

type Case = BTreeMap<String, FixtureTensor>;

const FIXTURES: &str = include_str!("fixtures/graph_layers.txt");

fn case(name: &str) -> Case {
    read_cases(FIXTURES)
        .into_iter()
        .find(|(case, _)| case == name)
        .unwrap_or_else(|| panic!("no case {name}"))
        .1
}

fn nodes(case: &Case) -> usize {
    case["in.x"].dims.first().copied().unwrap_or(7)
}

fn graph(case: &Case) -> Graph {
    Graph::from_edge_index(&case["idx.edge_index"].to_tensor(), 7).unwrap()
}

fn leaf(case: &Case, key: &str) -> DynTensor {
    case[key].to_tensor().requires_grad_().unwrap()
}

/// Checks `out` and the gradients of `inputs` (by fixture name) against the case.
fn check(name: &str, case: &Case, out: &DynTensor, inputs: &[(&str, &DynTensor)]) {
    assert_close(name, "out", out, &case["out"]);
    let refs: Vec<&DynTensor> = inputs.iter().map(|(_, t)| *t).collect();
    let grads = grad_with(&[out], &[&case["cot"].to_tensor()], &refs, false).unwrap();
    for ((key, _), g) in inputs.iter().zip(&grads) {
        assert_close(
            name,
            &format!("grad.{key}"),
            g,
            &case[&format!("grad.{key}")],
        );
    }
}

/// The case's `param.*` tensors under their names, as a state dict.
fn state_dict(case: &Case) -> StateDict {
    case.iter()
        .filter_map(|(k, v)| {
            k.strip_prefix("param.")
                .map(|name| (name.to_string(), v.to_tensor()))
        })
        .collect()
}

#[test]
fn spmm_matches_torch_sparse_mm() -> Result<()> {
    let case = case("spmm");
    let edges = case["idx.edge_index"].to_tensor().to_vec::<i64>()?;
    let count = edges.len() / 2;
    let (sources, targets) = edges.split_at(count);
    let values = leaf(&case, "in.values");
    let y = leaf(&case, "in.y");
    let a = CooMatrix::new(targets.to_vec(), sources.to_vec(), values.clone(), (7, 7))?.to_csr()?;
    check(
        "spmm",
        &case,
        &a.matmul(&y)?,
        &[("values", &values), ("y", &y)],
    );
    Ok(())
}

#[test]
fn aggregations_match_torch_scatter_reduce() -> Result<()> {
    for (name, how) in [
        ("scatter_sum", Aggregation::Sum),
        ("scatter_mean", Aggregation::Mean),
        ("scatter_max", Aggregation::Max),
    ] {
        let case = case(name);
        let graph = graph(&case);
        let x = leaf(&case, "in.x");
        let out = graph.aggregate(&graph.gather_sources(&x)?, how)?;
        check(name, &case, &out, &[("x", &x)]);
    }
    Ok(())
}

#[test]
fn gcn_matches_pytorch_geometric() -> Result<()> {
    let case = case("gcn");
    let mut layer = GcnConv::<5, 4>::new()?;
    layer.load_state_dict(&state_dict(&case))?;
    layer.weight = leaf(&case, "param.lin.weight");
    let bias = leaf(&case, "param.bias");
    layer.bias = Some(bias.clone());
    let x = leaf(&case, "in.x");
    let out = layer.forward_dyn(&x, &graph(&case))?;
    assert_eq!(nodes(&case), out.dims()[0]);
    check(
        "gcn",
        &case,
        &out,
        &[("x", &x), ("lin.weight", &layer.weight), ("bias", &bias)],
    );
    Ok(())
}

#[test]
fn sage_matches_pytorch_geometric() -> Result<()> {
    let case = case("sage");
    let mut layer = SageConv::<5, 4>::new()?;
    layer.load_state_dict(&state_dict(&case))?;
    layer.lin_l.weight = leaf(&case, "param.lin_l.weight");
    layer.lin_l.bias = Some(leaf(&case, "param.lin_l.bias"));
    layer.lin_r.weight = leaf(&case, "param.lin_r.weight");
    let x = leaf(&case, "in.x");
    let out = layer.forward_dyn(&x, &graph(&case))?;
    let bias = layer.lin_l.bias.clone().unwrap();
    check(
        "sage",
        &case,
        &out,
        &[
            ("x", &x),
            ("lin_l.weight", &layer.lin_l.weight),
            ("lin_l.bias", &bias),
            ("lin_r.weight", &layer.lin_r.weight),
        ],
    );
    Ok(())
}

#[test]
fn gin_matches_pytorch_geometric() -> Result<()> {
    let case = case("gin");
    let mut layer = GinConv::<5, 4>::with_eps(0.0, true)?;
    layer.load_state_dict(&state_dict(&case))?;
    layer.eps = leaf(&case, "param.eps");
    layer.first.weight = leaf(&case, "param.nn.0.weight");
    layer.first.bias = Some(leaf(&case, "param.nn.0.bias"));
    layer.second.weight = leaf(&case, "param.nn.2.weight");
    layer.second.bias = Some(leaf(&case, "param.nn.2.bias"));
    let x = leaf(&case, "in.x");
    let out = layer.forward_dyn(&x, &graph(&case))?;
    let (b0, b2) = (
        layer.first.bias.clone().unwrap(),
        layer.second.bias.clone().unwrap(),
    );
    check(
        "gin",
        &case,
        &out,
        &[
            ("x", &x),
            ("eps", &layer.eps),
            ("nn.0.weight", &layer.first.weight),
            ("nn.0.bias", &b0),
            ("nn.2.weight", &layer.second.weight),
            ("nn.2.bias", &b2),
        ],
    );
    Ok(())
}

#[test]
fn gat_matches_pytorch_geometric() -> Result<()> {
    let case = case("gat");
    let mut layer = GatConv::<5, 3, 2>::new()?;
    layer.load_state_dict(&state_dict(&case))?;
    layer.weight = leaf(&case, "param.lin.weight");
    layer.att_src = leaf(&case, "param.att_src");
    layer.att_dst = leaf(&case, "param.att_dst");
    let bias = leaf(&case, "param.bias");
    layer.bias = Some(bias.clone());
    let x = leaf(&case, "in.x");
    let out = layer.forward_dyn(&x, &graph(&case))?;
    check(
        "gat",
        &case,
        &out,
        &[
            ("x", &x),
            ("att_src", &layer.att_src),
            ("att_dst", &layer.att_dst),
            ("bias", &bias),
            ("lin.weight", &layer.weight),
        ],
    );
    Ok(())
}
