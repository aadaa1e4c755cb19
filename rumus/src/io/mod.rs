//! Reading and writing files: model weights (safetensors; GGUF, read), training checkpoints,
//! and the atomic write both use so a crash never leaves a torn file.

mod atomic;
mod checkpoint;
mod checkpoint_dir;
#[cfg(feature = "llm")]
mod gguf;
#[cfg(feature = "llm")]
mod gguf_dequantize;
#[cfg(feature = "llm")]
mod gguf_format;
mod json;
mod safetensors;
mod safetensors_format;

pub(crate) use self::atomic::AtomicFile;
pub use self::atomic::write_atomic;
pub use self::checkpoint::Checkpoint;
pub use self::checkpoint_dir::{CheckpointManager, CheckpointScan};
#[cfg(feature = "llm")]
#[cfg_attr(docsrs, doc(cfg(feature = "llm")))]
pub use self::gguf::GgufFile;
#[cfg(feature = "llm")]
#[cfg_attr(docsrs, doc(cfg(feature = "llm")))]
pub use self::gguf_format::{GgmlType, GgufTensorInfo, GgufValue};
pub use self::json::header_key_comparisons;
pub use self::safetensors::{
    load_safetensors, load_safetensors_with, read_state, save_safetensors, write_state,
};
