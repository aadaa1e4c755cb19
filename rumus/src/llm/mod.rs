//! Language models from the files they ship in (the `llm` feature, which also brings GGUF
//! files, `io::GgufFile`, and their block-quantized matrices, `nn::block_quantized`).
//! [`Llama`] reads a Llama-architecture model (Llama 2/3, SmolLM2, TinyLlama, ...) from a
//! GGUF file or a Hugging Face checkpoint folder, computes its next-token logits with a
//! key/value cache, and continues a prompt greedily or by sampling; [`KvPool`] and
//! [`Llama::forward_paged`] run many sequences at once over one bounded pool of cache blocks
//! (a server's continuous batching). [`Tokenizer`] turns text into its token ids and back,
//! and [`chat_ml`] writes a conversation in ChatML.

mod cache;
mod config;
mod hf;
mod llama;
mod paged;
mod sampling;
mod tokenizer;
mod weights;

pub use cache::KvCache;
pub use config::LlamaConfig;
pub use llama::{Llama, WeightFormat};
pub use paged::{BatchEntry, DEFAULT_BLOCK_TOKENS, KvPool, PagedCache};
pub use sampling::Sampling;
pub use tokenizer::{Tokenizer, chat_ml};

use crate::error::Error;

fn invalid(message: String) -> Error {
    Error::InvalidArgument {
        op: "Llama",
        message,
    }
}
