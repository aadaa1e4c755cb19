//! A Llama model on a GPU (`Llama::to_device`) against `transformers` and the CPU: the tiny
//! randomly initialised Hugging Face Llama of `tests/hf_llama.rs` (grouped key/value heads,
//! an untied output), its logits with f32 and f16 matrices, the same logits a token at a
//! time through the key/value cache on the device, a batch of sequences, and greedy
//! generation.

mod common;

use common::tiny_llama::{expected, folder, logits_token_by_token};
use rumus::DType;
use rumus::llm::Llama;

#[test]
fn a_llama_on_the_gpu_gives_the_logits_transformers_gives() {
    let Some(device) = common::gpu::gpu() else {
        return;
    };
    let _serial = common::gpu::serial();
    let (tokens, want, scale) = expected();
    let on_cpu = Llama::from_hf(folder()).unwrap();
    // f32 sums in another order; f16 matrices round every weight and each product's
    // operands to 11 significant bits (with f32 accumulation).
    for (dtype, tolerance) in [(DType::F32, 1e-4), (DType::F16, 2e-2)] {
        let model = on_cpu.to_device(&device, dtype).unwrap();
        assert_eq!(model.device(), &device);
        let logits = model.logits(&tokens).unwrap();
        assert_eq!(
            logits.device(),
            device,
            "{dtype:?}: the logits stay on the device"
        );
        assert_eq!(logits.dims(), [tokens.len(), 256]);
        let worst = common::max_abs_diff(&logits.to_f64_vec(), &want);
        assert!(
            worst < tolerance * scale,
            "{dtype:?}: worst {worst} of logits up to {scale}"
        );
        let worst = common::max_abs_diff(&logits_token_by_token(&model, &tokens), &want);
        assert!(
            worst < tolerance * scale,
            "{dtype:?}, a token at a time: worst {worst}"
        );
    }
    let f32_model = on_cpu.to_device(&device, DType::F32).unwrap();
    assert_eq!(
        f32_model.generate_greedy(&tokens[..3], 6, None).unwrap(),
        on_cpu.generate_greedy(&tokens[..3], 6, None).unwrap(),
        "greedy continuations"
    );
    // A batch of two sequences on the device: each one's logits as it gives alone.
    let (first, second): (Vec<i64>, Vec<i64>) = (
        tokens[..4].to_vec(),
        tokens[..4].iter().rev().copied().collect(),
    );
    let both = f32_model
        .forward_batch(&[&first, &second], &mut f32_model.new_cache())
        .unwrap();
    for (i, sequence) in [&first, &second].into_iter().enumerate() {
        let alone = f32_model.logits(sequence).unwrap().to_f64_vec();
        let batched = both.narrow(0, i, 1).unwrap().to_f64_vec();
        assert!(
            common::max_abs_diff(&alone, &batched) < 1e-4 * scale,
            "sequence {i} of the batch"
        );
    }
    let Err(refused) = on_cpu.to_device(&device, DType::I64) else {
        panic!("an i64 model was made");
    };
    assert!(
        refused.to_string().contains("f32, f16 or bf16"),
        "{refused}"
    );
}
