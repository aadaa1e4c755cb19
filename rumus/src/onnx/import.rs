//! Running an ONNX model in rumus: the graph's nodes evaluated in order with rumus's ops,
//! the initializers as tensors. Every op is checked when the file is loaded, so an
//! unsupported one is an error naming it (and its node) before anything runs.

use std::collections::HashMap;
use std::path::Path;

use super::decode::{ModelProto, NodeProto, TensorData, TensorValues, decode_model};
use super::import_ops::{SUPPORTED, check_at_load, evaluate};
use super::limits::Limits;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::DynTensor;

/// A model read from an ONNX file, ready to run on CPU tensors.
///
/// ```no_run
/// # fn main() -> rumus::Result<()> {
/// let model = rumus::onnx::OnnxModel::load("mlp.onnx")?;
/// let x = rumus::DynTensor::zeros(&[1, 784], rumus::DType::F32)?;
/// let outputs = model.run(&[&x])?;
/// println!("{:?}", outputs[0].dims());
/// # Ok(()) }
/// ```
pub struct OnnxModel {
    /// Where it came from, for messages.
    path: String,
    nodes: Vec<NodeProto>,
    initializers: Vec<(String, DynTensor)>,
    /// Graph inputs that are not initializers: name and static dims.
    inputs: Vec<(String, Vec<Option<usize>>)>,
    outputs: Vec<String>,
    opset: i64,
    limits: Limits,
}

impl std::fmt::Debug for OnnxModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxModel")
            .field("path", &self.path)
            .field("opset", &self.opset)
            .field("nodes", &self.nodes.len())
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .finish()
    }
}

/// The oldest default-domain opset the runner follows (the semantics of `Softmax`,
/// `Unsqueeze`, `Squeeze`, `ReduceSum`, `Slice` and `Split` inputs are those of opset 13
/// and later).
pub const MIN_IMPORT_OPSET: i64 = 13;

/// The newest default-domain opset the runner follows. Opset 18 moved the axes of the
/// reductions to an input and gave `Split` `num_outputs`, 20 added `Gelu`; 21 and 22 only
/// widened the element types of the imported ops (4-bit integers, bfloat16, which are
/// refused by type). A later opset may change what an op computes, so it is refused.
pub const MAX_IMPORT_OPSET: i64 = 22;

impl OnnxModel {
    /// Reads and checks the model at `path`, under the default [`Limits`].
    pub fn load(path: impl AsRef<Path>) -> Result<OnnxModel> {
        OnnxModel::load_with_limits(path, Limits::default())
    }

    /// Reads and checks the model at `path`; loading and every [`run`](Self::run) stay
    /// within `limits` (an error naming the limit otherwise).
    pub fn load_with_limits(path: impl AsRef<Path>, limits: Limits) -> Result<OnnxModel> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::Io {
            path: path.display().to_string(),
            message: format!("cannot read the ONNX model: {e}"),
        })?;
        OnnxModel::from_bytes_with_limits(&bytes, &path.display().to_string(), limits)
    }

    /// Reads and checks a model held in memory, under the default [`Limits`]; `name` stands
    /// for the file in messages.
    pub fn from_bytes(bytes: &[u8], name: &str) -> Result<OnnxModel> {
        OnnxModel::from_bytes_with_limits(bytes, name, Limits::default())
    }

    /// [`from_bytes`](Self::from_bytes) under `limits`, as
    /// [`load_with_limits`](Self::load_with_limits).
    pub fn from_bytes_with_limits(bytes: &[u8], name: &str, limits: Limits) -> Result<OnnxModel> {
        let proto = decode_model(bytes, name)?;
        OnnxModel::from_proto(proto, name, limits)
    }

    fn from_proto(proto: ModelProto, path: &str, limits: Limits) -> Result<OnnxModel> {
        let format = |message: String| Error::Format {
            path: path.to_string(),
            message,
        };
        let opset = proto.opset.ok_or_else(|| {
            format("the model imports no version of the default (ai.onnx) opset".into())
        })?;
        if opset < MIN_IMPORT_OPSET {
            return Err(format(format!(
                "the model is written for opset {opset}; rumus runs opset {MIN_IMPORT_OPSET} \
                 and later (re-export with `opset_version=17`)"
            )));
        }
        if opset > MAX_IMPORT_OPSET {
            return Err(format(format!(
                "the model is written for opset {opset}; rumus runs opsets {MIN_IMPORT_OPSET} \
                 to {MAX_IMPORT_OPSET} (re-export with `opset_version=17`)"
            )));
        }
        Limits::check_count("nodes", proto.nodes.len(), limits.max_nodes, "max_nodes")
            .and_then(|()| {
                let inputs = proto.inputs.len();
                Limits::check_count("inputs", inputs, limits.max_inputs, "max_inputs")
            })
            .map_err(format)?;
        let unsupported: Vec<String> = proto
            .nodes
            .iter()
            .filter(|n| !(n.domain.is_empty() || n.domain == "ai.onnx"))
            .map(|n| format!("{} from domain {} (node {:?})", n.op_type, n.domain, n.name))
            .chain(
                proto
                    .nodes
                    .iter()
                    .filter(|n| !SUPPORTED.contains(&n.op_type.as_str()))
                    .map(|n| format!("{} (node {:?})", n.op_type, n.name)),
            )
            .collect();
        if !unsupported.is_empty() {
            return Err(format(format!(
                "rumus cannot run these ONNX ops: {}; the ops it runs are {}",
                unsupported.join(", "),
                SUPPORTED.join(", ")
            )));
        }
        let initializers = proto
            .initializers
            .into_iter()
            .map(|t| {
                limits
                    .check_dims(&format!("initializer {:?}", t.name), &t.dims)
                    .map_err(format)?;
                Ok((t.name.clone(), tensor_of(t)?))
            })
            .collect::<Result<Vec<_>>>()?;
        // Inputs that name an initializer are weights (older exporters list them all).
        let weights: std::collections::HashSet<&str> =
            initializers.iter().map(|(name, _)| name.as_str()).collect();
        let inputs: Vec<(String, Vec<Option<usize>>)> = proto
            .inputs
            .into_iter()
            .filter(|i| !weights.contains(i.name.as_str()))
            .map(|i| {
                if i.dims.len() > limits.max_rank {
                    return Err(format(format!(
                        "input {:?} has rank {}, over the limit of {} (Limits::max_rank)",
                        i.name,
                        i.dims.len(),
                        limits.max_rank
                    )));
                }
                Ok((i.name, i.dims))
            })
            .collect::<Result<_>>()?;
        check_nodes(&proto.nodes, &initializers, &inputs).map_err(format)?;
        let outputs: Vec<String> = proto.outputs.into_iter().map(|o| o.name).collect();
        let nodes = super::fuse::fuse_gelu(proto.nodes, &initializers, &outputs);
        Ok(OnnxModel {
            path: path.to_string(),
            nodes,
            initializers,
            inputs,
            outputs,
            opset,
            limits,
        })
    }

    /// The names of the inputs [`run`](Self::run) takes, in order.
    pub fn input_names(&self) -> Vec<&str> {
        self.inputs.iter().map(|(name, _)| name.as_str()).collect()
    }

    /// The dims the file gives each input of [`run`](Self::run), in order: `None` where an
    /// axis is symbolic (a batch or sequence length any size fits).
    pub fn input_shapes(&self) -> Vec<(&str, &[Option<usize>])> {
        self.inputs
            .iter()
            .map(|(name, dims)| (name.as_str(), dims.as_slice()))
            .collect()
    }

    /// The names of the outputs [`run`](Self::run) returns, in order.
    pub fn output_names(&self) -> Vec<&str> {
        self.outputs.iter().map(String::as_str).collect()
    }

    /// The model's weights by their names in the file (for a model exported from PyTorch
    /// without constant folding, its state-dict names).
    pub fn initializers(&self) -> &[(String, DynTensor)] {
        &self.initializers
    }

    /// The limits loading checked and every run keeps to.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The default-domain opset the file was written for.
    pub fn opset(&self) -> i64 {
        self.opset
    }

    /// The same model with its floating-point weights on `device` (`Device::gpu()`,
    /// `Device::cuda()`): [`run`](Self::run) then takes inputs there and computes there.
    /// Integer and boolean initializers (the shape arithmetic exporters write, whose values
    /// may not fit a GPU's 32-bit integers) stay on the host and join the device's tensors
    /// only where an op mixes them.
    pub fn to(&self, device: &crate::Device) -> Result<OnnxModel> {
        let initializers = self
            .initializers
            .iter()
            .map(|(name, t)| {
                let moved = if t.dtype().is_float() {
                    t.to(device)?
                } else {
                    t.clone()
                };
                Ok((name.clone(), moved))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(OnnxModel {
            path: self.path.clone(),
            nodes: self.nodes.clone(),
            initializers,
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
            opset: self.opset,
            limits: self.limits,
        })
    }

    /// Runs the graph on `inputs` (one per [`input_names`](Self::input_names), with the
    /// file's static dims) and returns its outputs. Every node's work and every allocation
    /// its ops make stay within the model's [`Limits`].
    pub fn run(&self, inputs: &[&DynTensor]) -> Result<Vec<DynTensor>> {
        crate::alloc::with_ceiling(self.limits.ceiling(), || self.run_within_limits(inputs))
    }

    fn run_within_limits(&self, inputs: &[&DynTensor]) -> Result<Vec<DynTensor>> {
        let op = "OnnxModel::run";
        if inputs.len() != self.inputs.len() {
            return Err(Error::InvalidArgument {
                op,
                message: format!(
                    "{} takes {} inputs ({:?}), got {}",
                    self.path,
                    self.inputs.len(),
                    self.input_names(),
                    inputs.len()
                ),
            });
        }
        let mut values: HashMap<&str, DynTensor> = self
            .initializers
            .iter()
            .map(|(name, t)| (name.as_str(), t.clone()))
            .collect();
        for ((name, dims), input) in self.inputs.iter().zip(inputs) {
            let fits = dims.len() == input.rank()
                && dims
                    .iter()
                    .zip(input.dims())
                    .all(|(want, &got)| want.is_none_or(|w| w == got));
            if !fits {
                let shown: Vec<String> = dims
                    .iter()
                    .map(|d| d.map_or("?".to_string(), |d| d.to_string()))
                    .collect();
                return Err(Error::InvalidArgument {
                    op,
                    message: format!(
                        "{}: input {name:?} has shape [{}] in the file, got {:?}",
                        self.path,
                        shown.join(", "),
                        input.dims()
                    ),
                });
            }
            values.insert(name.as_str(), (*input).clone());
        }
        for node in &self.nodes {
            let args = node
                .inputs
                .iter()
                .map(|name| {
                    if name.is_empty() {
                        return Ok(None);
                    }
                    values.get(name.as_str()).map(Some).ok_or_else(|| {
                        self.node_error(
                            node,
                            format!("its input {name:?} is computed by no earlier node"),
                        )
                    })
                })
                .collect::<Result<Vec<Option<&DynTensor>>>>()?;
            let moved = onto_one_device(&args).map_err(|e| self.node_error(node, e.to_string()))?;
            let args: Vec<Option<&DynTensor>> = match &moved {
                Some(moved) => moved.iter().map(Option::as_ref).collect(),
                None => args,
            };
            let results = evaluate(node, &args, &self.limits)
                .map_err(|e| self.node_error(node, e.to_string()))?;
            for (k, result) in results.iter().enumerate() {
                let checked = self
                    .limits
                    .check_dims(&format!("output {k}"), result.dims());
                checked.map_err(|message| self.node_error(node, message))?;
            }
            for (name, value) in node.outputs.iter().zip(results) {
                if !name.is_empty() {
                    values.insert(name.as_str(), value);
                }
            }
        }
        self.outputs
            .iter()
            .map(|name| {
                values.remove(name.as_str()).ok_or_else(|| Error::Format {
                    path: self.path.clone(),
                    message: format!("the graph output {name:?} is computed by no node"),
                })
            })
            .collect()
    }

    fn node_error(&self, node: &NodeProto, message: String) -> Error {
        Error::Format {
            path: self.path.clone(),
            message: format!("node {:?} ({}): {message}", node.name, node.op_type),
        }
    }
}

/// Checks every node against what the file fixes before any run: the ranks and types of
/// the initializers and graph inputs it reads, and its attributes (see
/// [`check_at_load`]). The error names the node.
fn check_nodes(
    nodes: &[NodeProto],
    initializers: &[(String, DynTensor)],
    inputs: &[(String, Vec<Option<usize>>)],
) -> std::result::Result<(), String> {
    // A name some node computes is known only when it runs (a valid graph has none such).
    let computed: std::collections::HashSet<&str> = nodes
        .iter()
        .flat_map(|n| n.outputs.iter().map(String::as_str))
        .collect();
    let known: HashMap<&str, (usize, Option<DType>)> = initializers
        .iter()
        .map(|(name, t)| (name.as_str(), (t.rank(), Some(t.dtype()))))
        .chain(
            inputs
                .iter()
                .map(|(name, dims)| (name.as_str(), (dims.len(), None))),
        )
        .filter(|(name, _)| !computed.contains(name))
        .collect();
    for node in nodes {
        let of = |name: &String| known.get(name.as_str()).copied();
        let ranks: Vec<Option<usize>> = node.inputs.iter().map(|n| of(n).map(|k| k.0)).collect();
        let dtypes: Vec<Option<DType>> = node
            .inputs
            .iter()
            .map(|n| of(n).and_then(|k| k.1))
            .collect();
        check_at_load(node, &ranks, &dtypes)
            .map_err(|e| format!("node {:?} ({}): {e}", node.name, node.op_type))?;
    }
    Ok(())
}

/// A decoded tensor as a rumus tensor on the CPU.
pub(super) fn tensor_of(t: TensorData) -> Result<DynTensor> {
    let dims = t.dims;
    Ok(match t.values {
        TensorValues::F32(v) => DynTensor::from_vec(v, &dims)?,
        TensorValues::F64(v) => DynTensor::from_vec(v, &dims)?,
        TensorValues::I64(v) => DynTensor::from_vec(v, &dims)?,
        TensorValues::Bool(v) => DynTensor::from_vec(v, &dims)?,
    })
}

/// A node's inputs on one device when they are on several: the host tensors an op made (a
/// mask, a filled constant) join the accelerator's; `None` when they already share one.
fn onto_one_device(args: &[Option<&DynTensor>]) -> Result<Option<Vec<Option<DynTensor>>>> {
    let mut devices = args.iter().flatten().map(|t| t.device());
    let Some(target) = devices.find(|d| !matches!(d, crate::Device::Cpu)) else {
        return Ok(None);
    };
    if args.iter().flatten().all(|t| t.device() == target) {
        return Ok(None);
    }
    args.iter()
        .map(|t| t.map(|t| t.to(&target)).transpose())
        .collect::<Result<Vec<_>>>()
        .map(Some)
}
