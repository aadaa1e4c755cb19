//! Llama models from Hugging Face checkpoints: a folder with `config.json` and
//! `model.safetensors`, as `save_pretrained` writes them.

use std::path::Path;

use serde_json::Value;

use super::config::LlamaConfig;
use super::invalid;
use super::llama::{Llama, check_dims};
use super::weights::Matrix;
use crate::dtype::DType;
use crate::error::Result;
use crate::io::read_state;
use crate::tensor::DynTensor;

impl LlamaConfig {
    /// The configuration in a Hugging Face `config.json` of a `"llama"` model.
    ///
    /// # Errors
    /// Not JSON, another `model_type`, a size missing, or sizes that do not fit together
    /// (each named).
    pub fn from_hf_json(text: &str) -> Result<LlamaConfig> {
        let json: Value = serde_json::from_str(text)
            .map_err(|e| invalid(format!("config.json is not valid JSON: {e}")))?;
        let model_type = json.get("model_type").and_then(Value::as_str);
        if model_type != Some("llama") {
            return Err(invalid(format!(
                "config.json's model_type is {model_type:?}; Llama reads \"llama\" models"
            )));
        }
        let size = |key: &str| -> Result<usize> {
            json.get(key)
                .and_then(Value::as_u64)
                .filter(|&v| v > 0)
                .map(|v| v as usize)
                .ok_or_else(|| invalid(format!("config.json has no positive integer `{key}`")))
        };
        let heads = size("num_attention_heads")?;
        let width = size("hidden_size")?;
        // (`rope_theta` at the top level; under `rope_parameters` since transformers 5)
        let rope = json
            .get("rope_theta")
            .or_else(|| json.pointer("/rope_parameters/rope_theta"))
            .and_then(Value::as_f64)
            .unwrap_or(10_000.0);
        let scaled = json
            .get("rope_scaling")
            .or_else(|| json.pointer("/rope_parameters/rope_type"))
            .filter(|v| !v.is_null() && v.as_str() != Some("default"));
        if let Some(scaling) = scaled {
            return Err(invalid(format!(
                "config.json asks for rope scaling {scaling}; Llama applies plain rotary positions"
            )));
        }
        let config = LlamaConfig {
            blocks: size("num_hidden_layers")?,
            width,
            heads,
            kv_heads: size("num_key_value_heads").unwrap_or(heads),
            feed_forward: size("intermediate_size")?,
            rms_eps: json
                .get("rms_norm_eps")
                .and_then(Value::as_f64)
                .unwrap_or(1e-6),
            rope_base: rope,
            vocab: size("vocab_size")?,
        };
        config.check()?;
        if let Some(head_dim) = json.get("head_dim").and_then(Value::as_u64)
            && head_dim as usize != config.head_width()
        {
            return Err(invalid(format!(
                "config.json's head_dim {head_dim} is not hidden_size / num_attention_heads = \
                 {}; Llama needs them equal",
                config.head_width()
            )));
        }
        Ok(config)
    }
}

/// The Hugging Face name of a tensor Llama fetches by its GGUF name.
fn hf_name(gguf: &str) -> String {
    match gguf {
        "token_embd.weight" => "model.embed_tokens.weight".into(),
        "output_norm.weight" => "model.norm.weight".into(),
        "output.weight" => "lm_head.weight".into(),
        _ => {
            let rest = gguf.strip_prefix("blk.").unwrap_or(gguf);
            let (block, part) = rest.split_once('.').unwrap_or((rest, ""));
            let part = match part {
                "attn_norm.weight" => "input_layernorm.weight",
                "attn_q.weight" => "self_attn.q_proj.weight",
                "attn_k.weight" => "self_attn.k_proj.weight",
                "attn_v.weight" => "self_attn.v_proj.weight",
                "attn_output.weight" => "self_attn.o_proj.weight",
                "ffn_norm.weight" => "post_attention_layernorm.weight",
                "ffn_gate.weight" => "mlp.gate_proj.weight",
                "ffn_up.weight" => "mlp.up_proj.weight",
                "ffn_down.weight" => "mlp.down_proj.weight",
                other => other,
            };
            format!("model.layers.{block}.{part}")
        }
    }
}

/// Query or key rows `[heads * hw, d]` from Hugging Face's order (each head's first halves,
/// then its second halves, rotated as pairs `(i, i + hw/2)`) to GGUF's (pairs side by side),
/// as llama.cpp's converter permutes them.
fn interleave_heads(w: &DynTensor, heads: usize) -> Result<DynTensor> {
    let [rows, d] = w.dims()[..] else {
        unreachable!("checked as a matrix before");
    };
    let hw = rows / heads;
    w.reshape(&[heads, 2, hw / 2, d])?
        .transpose(1, 2)?
        .contiguous()?
        .reshape(&[rows, d])
}

impl Llama {
    /// The model in a Hugging Face checkpoint folder (`config.json` and `model.safetensors`,
    /// as `LlamaForCausalLM.save_pretrained` writes them), every weight in f32.
    ///
    /// # Errors
    /// A file missing or malformed, another architecture, a tensor missing or of other dims
    /// than the configuration gives it (each named).
    pub fn from_hf(folder: impl AsRef<Path>) -> Result<Llama> {
        let folder = folder.as_ref();
        let config_path = folder.join("config.json");
        let text = std::fs::read_to_string(&config_path)
            .map_err(|e| invalid(format!("reading {}: {e}", config_path.display())))?;
        let config = LlamaConfig::from_hf_json(&text)?;
        let tensors: std::collections::HashMap<String, DynTensor> =
            read_state(folder.join("model.safetensors"))?
                .into_iter()
                .collect();
        let fetch = |name: &str, dims: &[usize]| -> Result<DynTensor> {
            let hf = hf_name(name);
            let t = tensors
                .get(&hf)
                .ok_or_else(|| invalid(format!("model.safetensors has no `{hf}`")))?;
            check_dims(&hf, t.dims(), dims)?;
            t.to_dtype(DType::F32)
        };
        let (heads, kv_heads) = (config.heads, config.kv_heads);
        let matrix = |name: &str, dims: &[usize]| -> Result<Matrix> {
            let w = fetch(name, dims)?;
            let w = if name.ends_with("attn_q.weight") {
                interleave_heads(&w, heads)?
            } else if name.ends_with("attn_k.weight") {
                interleave_heads(&w, kv_heads)?
            } else {
                w
            };
            Ok(Matrix::Dense(w))
        };
        Llama::assemble(config, !json_tied(&text), &fetch, &matrix)
    }
}

/// Whether `config.json` ties the output projection to the embedding.
fn json_tied(text: &str) -> bool {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|json| json.get("tie_word_embeddings").and_then(Value::as_bool))
        .unwrap_or(false)
}
