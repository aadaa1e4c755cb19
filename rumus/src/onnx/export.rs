//! Exporting a model: one traced forward pass becomes the graph (`trace` and `calls` write its
//! nodes); with dynamic axes, `dynamic` traces it again at other sizes and writes what
//! changed as shape arithmetic.

use std::path::Path;

use super::proto::{Dim, Initializer, Model, Node, ValueInfo};
use super::{OPSET, dynamic, trace};
use crate::autograd::enable_grad;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::io::write_atomic;
use crate::nn::Module;
use crate::tensor::DynTensor;

/// Traces `forward` on `example` and writes the ONNX model to `path` (atomically). `model`
/// names the parameters and buffers the pass reads; put it in eval mode first. Every size
/// in the file is the example's; [`export_with`] leaves chosen axes dynamic.
pub fn export(
    model: &dyn Module,
    example: &DynTensor,
    forward: impl FnOnce(&DynTensor) -> Result<DynTensor>,
    path: impl AsRef<Path>,
) -> Result<()> {
    let bytes = to_bytes(model, example, forward)?;
    write_atomic(path.as_ref(), &bytes)
}

/// [`export`] to bytes in memory.
pub fn to_bytes(
    model: &dyn Module,
    example: &DynTensor,
    forward: impl FnOnce(&DynTensor) -> Result<DynTensor>,
) -> Result<Vec<u8>> {
    let graph = trace_graph(model, example, forward)?;
    let input = ValueInfo {
        name: "input".into(),
        dtype: example.dtype(),
        dims: example.dims().iter().map(|&d| Dim::Fixed(d)).collect(),
    };
    let output_dims = graph.output_dims.iter().map(|&d| Dim::Fixed(d)).collect();
    Ok(graph.into_model(input, output_dims, Vec::new()).encode())
}

/// Which sizes of an exported graph are left to run time.
///
/// ```no_run
/// # use rumus::prelude::*;
/// # #[model] struct Mlp { fc1: Linear<784, 10> }
/// # fn main() -> rumus::Result<()> {
/// # let model = Mlp::new()?;
/// let example = DynTensor::zeros(&[4, 784], DType::F32)?;
/// let options = rumus::onnx::ExportOptions::new().dynamic_axis(0, "batch");
/// rumus::onnx::export_with(&model, &example, |x| model.fc1.forward_dyn(x), &options, "mlp.onnx")?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct ExportOptions {
    pub(super) dynamic_axes: Vec<DynamicAxis>,
}

/// An input axis whose size the file leaves to run time, and its name there (`dim_param`).
#[derive(Clone, Debug)]
pub(super) struct DynamicAxis {
    pub axis: usize,
    pub name: String,
}

impl ExportOptions {
    /// Every size fixed, as [`export`] writes it.
    pub fn new() -> Self {
        Self::default()
    }

    /// Leaves axis `axis` of the input to run time, named `name` in the file (`"batch"`,
    /// `"sequence"`), like an entry of `torch.onnx.export`'s `dynamic_axes`. The file then
    /// runs at any size of that axis, as long as the forward pass runs the same ops at every
    /// size (a loop over the axis, or an `if` on its size, is an export error).
    pub fn dynamic_axis(mut self, axis: usize, name: impl Into<String>) -> Self {
        self.dynamic_axes.push(DynamicAxis {
            axis,
            name: name.into(),
        });
        self
    }
}

/// [`export`] with `options`. With dynamic axes, `forward` runs more than once: at the
/// example's sizes and at one other size per dynamic axis (sizes computed from an axis are
/// found by how they change with it, and written as `Shape` arithmetic on the input). A
/// size of 1 on a dynamic axis is traced at 2 and 3 instead, since at 1 broadcasting can
/// make ops that do nothing, which the graph would then lack.
pub fn export_with(
    model: &dyn Module,
    example: &DynTensor,
    forward: impl Fn(&DynTensor) -> Result<DynTensor>,
    options: &ExportOptions,
    path: impl AsRef<Path>,
) -> Result<()> {
    let bytes = to_bytes_with(model, example, forward, options)?;
    write_atomic(path.as_ref(), &bytes)
}

/// [`export_with`] to bytes in memory.
pub fn to_bytes_with(
    model: &dyn Module,
    example: &DynTensor,
    forward: impl Fn(&DynTensor) -> Result<DynTensor>,
    options: &ExportOptions,
) -> Result<Vec<u8>> {
    if options.dynamic_axes.is_empty() {
        return to_bytes(model, example, forward);
    }
    let model = dynamic::export(model, example, &forward, &options.dynamic_axes)?;
    Ok(model.encode())
}

/// One traced forward pass: its nodes and constants, and what it returned.
pub(super) struct TracedGraph {
    pub nodes: Vec<Node>,
    pub initializers: Vec<Initializer>,
    pub output_dtype: DType,
    pub output_dims: Vec<usize>,
}

impl TracedGraph {
    /// The model of this graph with `input` and outputs of `output_dims`; `shape_nodes`
    /// (which read only the input) run first.
    pub fn into_model(
        self,
        input: ValueInfo,
        output_dims: Vec<Dim>,
        shape_nodes: Vec<Node>,
    ) -> Model {
        let mut nodes = shape_nodes;
        nodes.extend(self.nodes);
        Model {
            graph_name: "rumus".to_string(),
            opset: OPSET,
            nodes,
            initializers: self.initializers,
            inputs: vec![input],
            outputs: vec![ValueInfo {
                name: "output".into(),
                dtype: self.output_dtype,
                dims: output_dims,
            }],
        }
    }
}

/// Traces `forward` on `example`: the graph input is `input`, the output `output`.
pub(super) fn trace_graph(
    model: &dyn Module,
    example: &DynTensor,
    forward: impl FnOnce(&DynTensor) -> Result<DynTensor>,
) -> Result<TracedGraph> {
    let _grad = enable_grad();
    // A float input requires a gradient so everything computed from it can be told apart
    // from constants (see the `trace` module).
    let input = if example.dtype().is_float() {
        example.detach().requires_grad_()?
    } else {
        example.detach()
    };
    let mut named: Vec<(String, DynTensor, bool)> = model
        .named_tensors()
        .into_iter()
        .map(|(name, t)| (name, t, true))
        .collect();
    named.push(("input".to_string(), input.clone(), false));
    let (output, mut tracer) = trace::run(named, || forward(&input))?;
    if let Some(error) = tracer.error.take() {
        return Err(error);
    }
    // Values made by nodes have names starting with `/`; anything else returned is the
    // input, a parameter or a constant.
    let output_name = match tracer.name_of(&output) {
        Some(name) if name.starts_with('/') => name.to_string(),
        _ => {
            return Err(Error::InvalidArgument {
                op: trace::OP,
                message: "the forward pass returned a tensor no exportable op computed (the \
                          input, a parameter or a constant)"
                    .into(),
            });
        }
    };
    let mut nodes = tracer.nodes;
    // The graph output has its own name: rename the value where it is produced.
    for node in &mut nodes {
        for name in node.inputs.iter_mut().chain(node.outputs.iter_mut()) {
            if *name == output_name {
                *name = "output".to_string();
            }
        }
    }
    Ok(TracedGraph {
        nodes,
        initializers: tracer.initializers,
        output_dtype: output.dtype(),
        output_dims: output.dims().to_vec(),
    })
}
