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
//!   [`export_with`] and [`ExportOptions::dynamic_axis`] leave chosen input axes (the batch,
//!   a sequence length) to be given at run time, as `torch.onnx.export`'s `dynamic_axes`
//!   does: sizes computed from them become `Shape` arithmetic in the graph.
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
//!   checked against onnxruntime one node at a time, and so are `nn.LSTM` and `nn.GRU` layers
//!   (`LSTM` and `GRU` nodes, every direction). At load, PyTorch's pre-opset-20 GELU (five
//!   nodes) becomes one `Gelu`.
//! - The trace follows the ops the pass runs (Rust control flow is unrolled), as
//!   `torch.onnx.export` does. An op without an ONNX form is an error naming it, never a
//!   value baked into the file; so is a model left in training mode where that matters
//!   (BatchNorm with batch statistics, dropout).

mod calls;
mod decode;
mod dynamic;
mod export;
mod fuse;
mod import;
mod import_einsum;
mod import_gather_ops;
mod import_logic_ops;
mod import_norm_ops;
mod import_ops;
mod import_recurrent_ops;
mod import_scatter_ops;
mod import_tensor_ops;
mod import_window_ops;
mod limits;
mod nodes;
mod proto;
mod trace;

pub use export::{ExportOptions, export, export_with, to_bytes, to_bytes_with};
pub use import::{MAX_IMPORT_OPSET, MIN_IMPORT_OPSET, OnnxModel};
pub use import_ops::SUPPORTED as IMPORTED_OPS;
pub use limits::Limits;

/// The opset the exported nodes are written for.
pub const OPSET: i64 = 17;
