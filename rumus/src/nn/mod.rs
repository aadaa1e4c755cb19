//! Layers, loss functions and the module machinery `#[model]` builds on.

mod activation;
mod attention;
#[cfg(feature = "llm")]
#[cfg_attr(docsrs, doc(cfg(feature = "llm")))]
pub mod block_quantized;
mod checkpointed;
mod construct;
mod conv;
mod convert;
mod dropout;
mod embedding;
pub mod fixed_point;
mod forward;
pub mod functional;
mod fused_cross_entropy;
pub mod graph;
pub mod init;
mod linear;
mod loss;
mod mode;
mod module;
mod norm;
mod pool;
pub mod quantized;
mod recurrent;
mod state_loading;
mod summary;

pub use activation::{Gelu, Relu, Sigmoid, Silu, Tanh};
pub use attention::{
    AttentionOptions, AttentionWeights, FeedForwardActivation, MultiheadAttention,
    TransformerEncoderBlock, causal_mask, multi_head_attention,
};
pub use checkpointed::Checkpointed;
pub use construct::Construct;
pub use conv::{Conv1d, Conv2d, ConvTranspose2d};
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use forward::Forward;
pub use fused_cross_entropy::CrossEntropyRecord;
pub use graph::{GatConv, GcnConv, GinConv, SageConv, global_pool};
pub use linear::Linear;
pub use loss::{
    CrossEntropyOptions, KlReduction, NllLossOptions, Reduction, binary_cross_entropy,
    binary_cross_entropy_with_logits, cross_entropy, huber_loss, kl_div, l1_loss, mse_loss,
    nll_loss, smooth_l1_loss,
};
pub use mode::{ModeGuard, TrainingFlag};
pub(crate) use module::snapshot;
pub use module::{Device, Module, StateDict, group_digits};
pub use norm::{BatchNorm, BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm, RmsNorm};
pub use pool::{AdaptiveAvgPool2d, AvgPool2d, Flatten, MaxPool2d};
pub use recurrent::{Gru, Lstm, RnnWeights, gru, lstm};
pub use state_loading::{LoadOptions, LoadReport};
pub use summary::{ModelSummary, SummaryRow, summarize};

pub use crate::ops::fields::{
    BackwardHookHandle, ForwardHookHandle, register_backward_hook, register_forward_hook,
};
