//! ONNX export: a model's forward pass, traced on an example input, written as an ONNX file
//! (opset 17) that onnxruntime and every ONNX tool can run, like PyTorch's
//! `torch.onnx.export`.
//!
//! ```no_run
//! # use rumus::prelude::*;
//! # #[model] struct Mlp { fc1: Linear<784, 10> }
//! # fn main() -> rumus::Result<()> {
//! let mut model = Mlp::new()?;
//! model.eval();
//! let example = DynTensor::zeros(&[1, 784], DType::F32)?;
//! rumus::onnx::export(&model, &example, |x| model.fc1.forward_dyn(x), "mlp.onnx")?;
//! # Ok(()) }
//! ```
//!
//! - Parameters and buffers become initializers under their state-dict names
//!   (`fc1.weight`), so the file's weights are found by the same names as in PyTorch.
//! - The graph has the example's shapes: one input `input`, one output `output`.
//! - [`OnnxModel`] reads an ONNX file (from `torch.onnx.export` or anything else at opset
//!   13 to 22) and runs it with rumus's ops; an op outside [`IMPORTED_OPS`] is an error
//!   naming it when the file is loaded, and so is a node that the ranks and types of the
//!   file's initializers and inputs, or its attributes, rule out. A file is untrusted input: loading and running
//!   stay within [`Limits`] (elements, bytes, multiply-adds, nodes, inputs, rank), an error
//!   naming the limit otherwise. GPT-style decoders (`nn.MultiheadAttention` under a
//!   `torch.triu` mask, `scaled_dot_product_attention` over unbound heads, tanh-GELU) and
//!   MobileNet/U-Net-style convolutional networks (hardswish, squeeze-and-excitation,
//!   GroupNorm, nearest and bilinear resizing) exported by either of PyTorch's exporters run with
//!   PyTorch's outputs (`tests/onnx_import.rs`). The ops of BERT-style encoders (masks
//!   through `And`/`IsNaN`/`IsInf`, `GatherElements`, `GatherND`), T5's integer `Abs`,
//!   Whisper's 1-D convolutions and squeezenet's `ceil_mode` pools are imported too, each
//!   checked against onnxruntime one node at a time.
//! - The trace follows the ops the pass runs (Rust control flow is unrolled), as
//!   `torch.onnx.export` does. An op without an ONNX form is an error naming it, never a
//!   value baked into the file; so is a model left in training mode where that matters
//!   (BatchNorm with batch statistics, dropout).

mod calls;
mod decode;
mod import;
mod import_gather_ops;
mod import_logic_ops;
mod import_norm_ops;
mod import_ops;
mod import_tensor_ops;
mod import_window_ops;
mod limits;
mod nodes;
mod proto;
mod trace;

use std::path::Path;

pub use import::{MAX_IMPORT_OPSET, MIN_IMPORT_OPSET, OnnxModel};
pub use import_ops::SUPPORTED as IMPORTED_OPS;
pub use limits::Limits;

use crate::autograd::enable_grad;
use crate::error::{Error, Result};
use crate::io::write_atomic;
use crate::nn::Module;
use crate::tensor::DynTensor;
use proto::{Model, ValueInfo};

/// The opset the exported nodes are written for.
pub const OPSET: i64 = 17;

/// Traces `forward` on `example` and writes the ONNX model to `path` (atomically). `model`
/// names the parameters and buffers the pass reads; put it in eval mode first.
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
    let model = Model {
        graph_name: "rumus".to_string(),
        opset: OPSET,
        nodes,
        initializers: tracer.initializers,
        inputs: vec![ValueInfo {
            name: "input".into(),
            dtype: example.dtype(),
            dims: example.dims().to_vec(),
        }],
        outputs: vec![ValueInfo {
            name: "output".into(),
            dtype: output.dtype(),
            dims: output.dims().to_vec(),
        }],
    };
    Ok(model.encode())
}
