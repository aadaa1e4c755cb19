//! The recorded graph of a tensor as Graphviz DOT, for looking at what a backward pass will
//! walk: each record is a node labelled with its op, each parameter (a leaf) a box labelled
//! with its name, and an arrow runs from every input to the op that read it.

use std::collections::HashMap;
use std::fmt::Write;

use super::node::{Node, TensorId};
use crate::tensor::DynTensor;

/// The graph that produced `tensor`, in Graphviz DOT (`dot -Tsvg graph.dot -o graph.svg`).
/// Leaves found among `named` (a model's `named_parameters()`) carry their names; other
/// leaves are shown by id. A tensor off the graph (no gradient, or a leaf) gives a graph of
/// one node.
///
/// ```
/// use rumus::autograd::graph_dot;
/// use rumus::prelude::*;
///
/// let layer = Linear::<3, 2>::new()?;
/// let x = DynTensor::ones(&[4, 3], DType::F32)?;
/// let loss = layer.forward_dyn(&x)?.relu()?.sum(&[0, 1], false)?;
/// let dot = graph_dot(&loss, &layer.named_parameters());
/// assert!(dot.starts_with("digraph autograd {"));
/// assert!(dot.contains("label=\"weight\"") && dot.contains("relu"));
/// # Ok::<(), rumus::Error>(())
/// ```
pub fn graph_dot(tensor: &DynTensor, named: &[(String, DynTensor)]) -> String {
    let names: HashMap<TensorId, &str> = named
        .iter()
        .filter_map(|(name, t)| Some((t.id()?, name.as_str())))
        .collect();
    let mut out =
        String::from("digraph autograd {\n  rankdir=BT;\n  node [fontname=\"sans-serif\"];\n");
    let dims = format!("{:?}", tensor.dims());
    let _ = writeln!(out, "  output [label=\"output {dims}\", shape=plaintext];");
    let Some(meta) = tensor.grad_meta() else {
        out.push_str("}\n");
        return out;
    };
    let leaf = |out: &mut String, id: TensorId| {
        let label = names
            .get(&id)
            .map_or_else(|| format!("leaf #{}", id.get()), |n| (*n).to_string());
        let _ = writeln!(
            out,
            "  leaf{} [label=\"{}\", shape=box, style=filled, fillcolor=\"#dde8f7\"];",
            id.get(),
            escape(&label)
        );
        format!("leaf{}", id.get())
    };
    let Some(root) = &meta.node else {
        let name = leaf(&mut out, meta.id);
        let _ = writeln!(out, "  {name} -> output;");
        out.push_str("}\n");
        return out;
    };
    // Nodes by address: a record read by several later ops is one node.
    let key = |node: &Node| node as *const Node as *const () as usize;
    let mut seen: HashMap<usize, usize> = HashMap::new();
    let mut leaves_seen: Vec<TensorId> = Vec::new();
    let mut stack = vec![root.clone()];
    seen.insert(key(root), 0);
    let _ = writeln!(out, "  n0 -> output;");
    while let Some(node) = stack.pop() {
        let here = seen[&key(&node)];
        let _ = writeln!(out, "  n{here} [label=\"{}\"];", escape(node.op.name()));
        for edge in node.inputs.iter().flatten() {
            let from = match &edge.node {
                Some(input) => {
                    let next = seen.len();
                    let index = *seen.entry(key(input)).or_insert_with(|| {
                        stack.push(input.clone());
                        next
                    });
                    format!("n{index}")
                }
                None if leaves_seen.contains(&edge.id) => format!("leaf{}", edge.id.get()),
                None => {
                    leaves_seen.push(edge.id);
                    leaf(&mut out, edge.id)
                }
            };
            let _ = writeln!(out, "  {from} -> n{here};");
        }
    }
    out.push_str("}\n");
    out
}

/// A label as a DOT string's contents.
fn escape(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"")
}
