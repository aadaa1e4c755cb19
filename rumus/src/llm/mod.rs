//! Language models from the files they ship in. [`Llama`] reads a Llama-architecture model
//! (Llama 2/3, SmolLM2, TinyLlama, ...) from a GGUF file, computes its next-token logits with
//! a key/value cache, and continues a prompt greedily.

mod llama;

pub use llama::{KvCache, Llama, LlamaConfig};
