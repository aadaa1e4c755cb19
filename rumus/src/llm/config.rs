//! The sizes and constants of a Llama model, read from a GGUF file's metadata.

use crate::io::{GgufFile, GgufValue};

use super::invalid;
use crate::error::Result;

/// The sizes and constants of a Llama model (`llama.*` GGUF metadata).
#[derive(Debug, Clone, PartialEq)]
pub struct LlamaConfig {
    /// Transformer blocks (`llama.block_count`).
    pub blocks: usize,
    /// Width of the residual stream (`llama.embedding_length`).
    pub width: usize,
    /// Query heads (`llama.attention.head_count`).
    pub heads: usize,
    /// Key and value heads (`llama.attention.head_count_kv`; as many as `heads` without it).
    pub kv_heads: usize,
    /// Hidden width of the feed-forward (`llama.feed_forward_length`).
    pub feed_forward: usize,
    /// RMSNorm's epsilon (`llama.attention.layer_norm_rms_epsilon`).
    pub rms_eps: f64,
    /// Base of the rotary frequencies (`llama.rope.freq_base`, 10,000 without it).
    pub rope_base: f64,
    /// Tokens in the vocabulary (rows of the embedding).
    pub vocab: usize,
}

impl LlamaConfig {
    /// The configuration in `file`'s metadata.
    ///
    /// # Errors
    /// A file of another architecture, or a size missing or inconsistent.
    pub fn from_gguf(file: &GgufFile) -> Result<LlamaConfig> {
        let architecture = file
            .metadata("general.architecture")
            .and_then(GgufValue::as_str);
        if architecture != Some("llama") {
            return Err(invalid(format!(
                "general.architecture is {architecture:?}; Llama reads \"llama\" models"
            )));
        }
        let size = |key: &str| -> Result<usize> {
            file.metadata(key)
                .and_then(GgufValue::as_u64)
                .map(|v| v as usize)
                .filter(|&v| v > 0)
                .ok_or_else(|| invalid(format!("the file has no positive integer `{key}`")))
        };
        let float = |key: &str, default: f64| {
            file.metadata(key)
                .and_then(GgufValue::as_f64)
                .unwrap_or(default)
        };
        let heads = size("llama.attention.head_count")?;
        let kv_heads = size("llama.attention.head_count_kv").unwrap_or(heads);
        let width = size("llama.embedding_length")?;
        let embedding = file
            .tensor_info("token_embd.weight")
            .ok_or_else(|| invalid("the file has no `token_embd.weight`".into()))?;
        let config = LlamaConfig {
            blocks: size("llama.block_count")?,
            width,
            heads,
            kv_heads,
            feed_forward: size("llama.feed_forward_length")?,
            rms_eps: float("llama.attention.layer_norm_rms_epsilon", 1e-5),
            rope_base: float("llama.rope.freq_base", 10_000.0),
            vocab: embedding.dims[0],
        };
        config.check()?;
        Ok(config)
    }

    /// Heads that split the width evenly, in groups, into heads of an even width.
    pub(super) fn check(&self) -> Result<()> {
        let (width, heads, kv_heads) = (self.width, self.heads, self.kv_heads);
        if !width.is_multiple_of(heads)
            || !heads.is_multiple_of(kv_heads)
            || (width / heads) % 2 != 0
        {
            return Err(invalid(format!(
                "{heads} query heads and {kv_heads} key/value heads do not split a width of \
                 {width} into heads of an even width"
            )));
        }
        Ok(())
    }

    /// Width of one head.
    pub fn head_width(&self) -> usize {
        self.width / self.heads
    }
}
