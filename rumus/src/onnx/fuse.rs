//! Load-time rewrites of patterns exporters write as several nodes into the one op rumus runs
//! them with. Today one: GELU as PyTorch (and rumus) export it before opset 20,
//! `Mul(Mul(x, Add(Erf(Div(x, √2)), 1)), 0.5)`, five element-wise passes over the activation,
//! becomes one `Gelu` node, one vectorised pass (a third of the time on a `[1, 96, 112, 112]`
//! activation). A pattern is rewritten only where each value inside it feeds nothing but the
//! next node and its constants are those numbers, so the graph computes what it did.

use std::collections::HashMap;

use super::decode::{AttributeValue, NodeProto};
use super::import::tensor_of;
use crate::tensor::DynTensor;

/// `nodes` with every exported GELU made one `Gelu` node. `initializers` and the Constant
/// nodes give the constants; `graph_outputs` count as uses.
pub(super) fn fuse_gelu(
    nodes: Vec<NodeProto>,
    initializers: &[(String, DynTensor)],
    graph_outputs: &[String],
) -> Vec<NodeProto> {
    let graph = Graph::new(&nodes, initializers, graph_outputs);
    let found: Vec<Gelu> = (0..nodes.len()).filter_map(|i| graph.gelu_at(i)).collect();
    if found.is_empty() {
        return nodes;
    }
    let mut removed = vec![false; nodes.len()];
    let mut fused: HashMap<usize, NodeProto> = HashMap::new();
    for gelu in found {
        for i in gelu.inner {
            removed[i] = true;
        }
        let last = &nodes[gelu.last];
        fused.insert(
            gelu.last,
            NodeProto {
                op_type: "Gelu".into(),
                domain: String::new(),
                name: last.name.clone(),
                inputs: vec![gelu.input],
                outputs: last.outputs.clone(),
                attributes: Vec::new(),
            },
        );
    }
    nodes
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !removed[*i])
        .map(|(i, node)| fused.remove(&i).unwrap_or(node))
        .collect()
}

/// One exported GELU: its input, the nodes it replaces and the last of them.
struct Gelu {
    input: String,
    inner: [usize; 4],
    last: usize,
}

/// Who makes and who reads each value.
struct Graph<'a> {
    nodes: &'a [NodeProto],
    initializers: &'a [(String, DynTensor)],
    producer: HashMap<&'a str, usize>,
    consumers: HashMap<&'a str, Vec<usize>>,
    graph_outputs: &'a [String],
}

impl<'a> Graph<'a> {
    fn new(
        nodes: &'a [NodeProto],
        initializers: &'a [(String, DynTensor)],
        graph_outputs: &'a [String],
    ) -> Self {
        let mut producer = HashMap::new();
        let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            for output in &node.outputs {
                producer.insert(output.as_str(), i);
            }
            for input in &node.inputs {
                consumers.entry(input.as_str()).or_default().push(i);
            }
        }
        Graph {
            nodes,
            initializers,
            producer,
            consumers,
            graph_outputs,
        }
    }

    /// The one node reading `value`, if exactly one does and the graph does not return it.
    fn only_reader(&self, value: &str) -> Option<usize> {
        if self.graph_outputs.iter().any(|o| o == value) {
            return None;
        }
        match self.consumers.get(value).map(Vec::as_slice) {
            Some(&[reader]) => Some(reader),
            _ => None,
        }
    }

    /// The value of a one-element constant (an initializer or a Constant node's output).
    fn scalar(&self, value: &str) -> Option<f64> {
        let tensor = match self.initializers.iter().find(|(name, _)| name == value) {
            Some((_, t)) => t.clone(),
            None => {
                let node = &self.nodes[*self.producer.get(value)?];
                match (node.op_type.as_str(), node.attributes.first()) {
                    ("Constant", Some((name, AttributeValue::Tensor(t)))) if name == "value" => {
                        tensor_of(t.clone()).ok()?
                    }
                    ("Constant", Some((name, AttributeValue::Float(v))))
                        if name == "value_float" =>
                    {
                        return Some(f64::from(*v));
                    }
                    _ => return None,
                }
            }
        };
        (tensor.numel() == 1 && tensor.dtype().is_float()).then(|| tensor.to_f64_vec()[0])
    }

    /// Whether `value` is the constant `expected` (to f32 precision).
    fn is(&self, value: &str, expected: f64) -> bool {
        self.scalar(value)
            .is_some_and(|v| (v - expected).abs() <= 1e-6 * expected.abs())
    }

    /// Node `node`'s only output, if it is `op` with one.
    fn output_of(&self, node: usize, op: &str) -> Option<&'a str> {
        let n = &self.nodes[node];
        match (n.op_type == op, n.outputs.as_slice()) {
            (true, [output]) => Some(output.as_str()),
            _ => None,
        }
    }

    /// Of a two-input node whose other input is `known`, the first input that is not.
    fn other_input(&self, node: usize, known: impl Fn(&str) -> bool) -> Option<&'a str> {
        match self.nodes[node].inputs.as_slice() {
            [a, b] if known(b) => Some(a.as_str()),
            [a, b] if known(a) => Some(b.as_str()),
            _ => None,
        }
    }

    /// The exported GELU whose `Erf` is node `erf`, if it is one.
    fn gelu_at(&self, erf: usize) -> Option<Gelu> {
        let erf_out = self.output_of(erf, "Erf")?;
        let scaled = self.nodes[erf].inputs.first()?;
        let div = *self.producer.get(scaled.as_str())?;
        self.output_of(div, "Div")?;
        let x = match self.nodes[div].inputs.as_slice() {
            [x, root] if self.is(root, std::f64::consts::SQRT_2) => x.as_str(),
            _ => return None,
        };
        if self.only_reader(scaled)? != erf {
            return None;
        }
        let add = self.only_reader(erf_out)?;
        let shifted = self.output_of(add, "Add")?;
        self.other_input(add, |v| self.is(v, 1.0))?;
        let mul = self.only_reader(shifted)?;
        let product = self.output_of(mul, "Mul")?;
        self.other_input(mul, |v| v == x)?;
        let half = self.only_reader(product)?;
        self.output_of(half, "Mul")?;
        self.other_input(half, |v| self.is(v, 0.5))?;
        Some(Gelu {
            input: x.to_string(),
            inner: [div, erf, add, mul],
            last: half,
        })
    }
}
