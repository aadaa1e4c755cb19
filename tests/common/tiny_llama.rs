//! The tiny randomly initialised Hugging Face Llama of `tests/fixtures/tiny_llama` and the
//! logits `transformers` gave for its tokens (`tests/fixtures/make_hf_llama_fixtures.py`).

use std::path::PathBuf;

use rumus::llm::Llama;

/// Its checkpoint folder (`config.json` and `model.safetensors`).
pub fn folder() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tiny_llama")
}

/// The fixture's tokens, `transformers`' logits for them (`[tokens, 256]`, row-major) and
/// their largest magnitude (at least 1).
pub fn expected() -> (Vec<i64>, Vec<f64>, f64) {
    let case = super::fixture_file::case(include_str!("../fixtures/hf_llama.txt"), "tiny_llama");
    let tokens = case["tokens"].values.iter().map(|&t| t as i64).collect();
    let logits = case["logits"].values.clone();
    let scale = logits.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    (tokens, logits, scale)
}

/// `model`'s logits for `tokens` run a token at a time through one key/value cache.
pub fn logits_token_by_token(model: &Llama, tokens: &[i64]) -> Vec<f64> {
    let mut cache = model.new_cache();
    tokens
        .iter()
        .flat_map(|&t| model.forward(&[t], &mut cache).unwrap().to_f64_vec())
        .collect()
}
