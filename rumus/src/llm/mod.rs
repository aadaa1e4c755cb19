//! Language models from the files they ship in. [`Llama`] reads a Llama-architecture model
//! (Llama 2/3, SmolLM2, TinyLlama, ...) from a GGUF file and computes its next-token logits.

mod llama;

pub use llama::{Llama, LlamaConfig};
