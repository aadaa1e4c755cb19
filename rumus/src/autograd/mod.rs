//! Reverse-mode automatic differentiation.
//!
//! Every op that reads a tensor requiring a gradient attaches a [`BackwardRecord`] to its
//! output (for rumus's ops, a [`BackwardOp`](crate::ops::BackwardOp) of the table of
//! derivatives; the tape itself names no op). [`DynTensor::backward`](crate::DynTensor::backward) and [`grad`] walk those records
//! from the output back to the leaves, visiting only what the output depends on, and collect
//! gradients into an accumulate-only [`GradientStore`]. Under [`no_grad`] nothing is recorded
//! and no graph metadata is allocated.

pub(crate) mod anomaly;
mod checkpoint;
mod dot;
mod engine;
mod grad_mode;
mod gradcheck;
mod gradients;
mod node;
mod record;
pub(crate) mod tensor_hooks;

pub use anomaly::anomaly_enabled;
pub use checkpoint::{CheckpointRecord, Segment, checkpoint};
pub use dot::graph_dot;
pub use engine::{ReadyHook, grad, grad_with};
pub use grad_mode::{GradModeGuard, enable_grad, is_grad_enabled, no_grad};
pub use gradcheck::{GradcheckError, GradcheckOptions, gradcheck};
pub use gradients::GradientStore;
pub use node::{GraphLinks, Node, Saved, TensorId, live_nodes};
pub use record::BackwardRecord;
pub use tensor_hooks::GradHookHandle;

pub(crate) use node::{GradMeta, record};
