//! Llama models from Hugging Face checkpoints (`Llama::from_hf`) against `transformers`: a
//! small randomly initialised `LlamaForCausalLM` (grouped key/value heads, rope theta 500,000,
//! an untied output, random norm weights) saved with `save_pretrained`, and its logits
//! (`tests/fixtures/make_hf_llama_fixtures.py`).

mod common;

use std::path::Path;

use common::scratch::Scratch;
use common::tiny_llama::{expected, folder, logits_token_by_token};
use rumus::llm::{Llama, LlamaConfig};

#[test]
fn a_hugging_face_llama_gives_the_logits_transformers_gives() {
    let (tokens, want, scale) = expected();
    let model = Llama::from_hf(folder()).unwrap();
    let config = model.config();
    assert_eq!(
        (
            config.blocks,
            config.width,
            config.heads,
            config.kv_heads,
            config.vocab
        ),
        (3, 64, 4, 2, 256)
    );
    assert_eq!(config.rope_base, 500_000.0);
    let logits = model.logits(&tokens).unwrap();
    assert_eq!(logits.dims(), [tokens.len(), 256]);
    let worst = common::max_abs_diff(&logits.to_f64_vec(), &want);
    // f32 sums in another order, against logits up to `scale`.
    assert!(
        worst < 1e-5 * scale,
        "worst {worst} of logits up to {scale}"
    );
    // The key/value cache gives the same logits a token at a time.
    let worst = common::max_abs_diff(&logits_token_by_token(&model, &tokens), &want);
    assert!(worst < 1e-5 * scale, "cached: worst {worst}");
}

#[test]
fn a_cloned_cache_branches_a_conversation_without_touching_the_original() {
    let model = Llama::from_hf(folder()).unwrap();
    let (prefix, a, b) = ([1i64, 17, 200, 3], [99i64, 5], [42i64, 7, 8]);
    let mut cache = model.cache_with_capacity(16);
    model.forward(&prefix, &mut cache).unwrap();
    let mut branch = cache.try_clone().unwrap();
    let on_a = model.forward(&a, &mut cache).unwrap();
    let on_b = model.forward(&b, &mut branch).unwrap();
    // Each continuation's logits are those of its whole sequence run uncached.
    for (tokens, got) in [(&a[..], on_a), (&b[..], on_b)] {
        let all: Vec<i64> = prefix.iter().chain(tokens).copied().collect();
        let want = model.logits(&all).unwrap();
        let want = want.narrow(0, prefix.len(), tokens.len()).unwrap();
        let worst = common::max_abs_diff(&got.to_f64_vec(), &want.to_f64_vec());
        assert!(worst < 1e-5, "{tokens:?}: {worst}");
    }
    assert_eq!((cache.len(), branch.len()), (6, 7));
    // The original goes on from its own keys, which the branch's tokens did not overwrite.
    let next = model.forward(&[11], &mut cache).unwrap();
    let all: Vec<i64> = prefix.iter().chain(&a).chain(&[11]).copied().collect();
    let want = model.logits(&all).unwrap().narrow(0, 6, 1).unwrap();
    let worst = common::max_abs_diff(&next.to_f64_vec(), &want.to_f64_vec());
    assert!(worst < 1e-5, "the original after the branch: {worst}");
}

/// A copy of the fixture's folder with `config.json` replaced by `config`.
fn with_config(config: &str) -> Scratch {
    let dir = Scratch::new("hf_llama");
    std::fs::copy(
        folder().join("model.safetensors"),
        dir.join("model.safetensors"),
    )
    .unwrap();
    std::fs::write(dir.join("config.json"), config).unwrap();
    dir
}

fn refused(dir: &Scratch, says: &str) {
    let dir: &Path = dir.dir();
    let message = match Llama::from_hf(dir) {
        Ok(_) => panic!("loaded; expected an error saying {says:?}"),
        Err(e) => e.to_string(),
    };
    assert!(message.contains(says), "{message}");
}

#[test]
fn bad_checkpoints_are_errors_that_say_what_is_wrong() {
    let original = std::fs::read_to_string(folder().join("config.json")).unwrap();
    refused(&with_config("{not json"), "not valid JSON");
    refused(
        &with_config(&original.replace("\"llama\"", "\"gpt2\"")),
        "model_type is Some(\"gpt2\")",
    );
    refused(
        &with_config(&original.replace("\"num_hidden_layers\": 3", "\"num_hidden_layers\": 4")),
        "model.safetensors has no `model.layers.3.input_layernorm.weight`",
    );
    refused(
        &with_config(&original.replace("\"intermediate_size\": 96", "\"intermediate_size\": 95")),
        "the configuration makes it [95, 64]",
    );
    refused(
        &with_config(&original.replace("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3")),
        "do not split a width of 64",
    );
    refused(
        &with_config(&original.replace("\"vocab_size\": 256", "\"vocab_size\": 0")),
        "no positive integer `vocab_size`",
    );
    refused(&Scratch::new("hf_llama_empty"), "config.json");
    let err = LlamaConfig::from_hf_json(
        &original.replace("\"rope_type\": \"default\"", "\"rope_type\": \"yarn\""),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("rope scaling"), "{err}");
}

/// Several sequences run as one batch give each sequence's logits as it gives alone: the
/// prompts together, then a token each through the batch's cache.
#[test]
fn a_batch_of_sequences_gives_each_sequence_s_logits() {
    let model = Llama::from_hf(folder()).unwrap();
    let prompts: [&[i64]; 3] = [&[5, 17, 99, 3], &[200, 1, 1, 42], &[7, 7, 7, 7]];
    let next: [i64; 3] = [11, 250, 0];
    let mut batch_cache = model.new_cache();
    let together = model.forward_batch(&prompts, &mut batch_cache).unwrap();
    assert_eq!(together.dims(), [3, 4, 256]);
    let steps: Vec<&[i64]> = next.iter().map(std::slice::from_ref).collect();
    let stepped = model.forward_batch(&steps, &mut batch_cache).unwrap();
    assert_eq!(stepped.dims(), [3, 1, 256]);
    for (i, prompt) in prompts.iter().enumerate() {
        let mut cache = model.new_cache();
        let alone = model.forward(prompt, &mut cache).unwrap().to_f64_vec();
        let batched = together.narrow(0, i, 1).unwrap().to_f64_vec();
        assert!(common::max_abs_diff(&alone, &batched) < 1e-5, "prompt {i}");
        let alone = model.forward(&[next[i]], &mut cache).unwrap().to_f64_vec();
        let batched = stepped.narrow(0, i, 1).unwrap().to_f64_vec();
        assert!(common::max_abs_diff(&alone, &batched) < 1e-5, "step of {i}");
    }
    // One length per call, and a cache keeps its batch size.
    let uneven = model.forward_batch(&[&[1, 2], &[3]], &mut model.new_cache());
    assert!(
        uneven
            .unwrap_err()
            .to_string()
            .contains("one length per call")
    );
    let resized = model.forward_batch(&[&[1]], &mut batch_cache);
    assert!(
        resized
            .unwrap_err()
            .to_string()
            .contains("batches of one size")
    );
}
