//! A small GPT-style character model: token and position embeddings, two pre-norm
//! transformer blocks with causal attention, a final norm and a projection to the vocabulary.
//! Shared by the `char_transformer` example and its test.

use rumus::nn::{
    CrossEntropyOptions, Embedding, LayerNorm, Linear, TransformerEncoderBlock, cross_entropy,
};
use rumus::prelude::*;
use rumus::rng::Generator;

/// The bundled public-domain story.
pub const TEXT: &str = include_str!("../data/lighthouse.txt");
/// Distinct characters the model can read and write.
pub const VOCAB: usize = 64;
/// Longest context the model sees.
pub const BLOCK: usize = 64;
const WIDTH: usize = 64;

#[model]
pub struct CharTransformer {
    token: Embedding<VOCAB, WIDTH>,
    position: Embedding<BLOCK, WIDTH>,
    block1: TransformerEncoderBlock<WIDTH, 4, 128>,
    block2: TransformerEncoderBlock<WIDTH, 4, 128>,
    norm: LayerNorm<WIDTH>,
    head: Linear<WIDTH, VOCAB>,
}

#[model]
impl CharTransformer {
    /// Logits `[B, T, VOCAB]` of the next character at every position of `ids` `[B, T]`.
    pub fn forward(&self, ids: &DynTensor) -> rumus::Result<DynTensor> {
        let t = ids.dims()[1];
        let positions = DynTensor::arange(0.0, t as f64, 1.0, DType::I64)?.to(&ids.device())?;
        let mut h = self
            .token
            .forward_dyn(ids)?
            .add(&self.position.forward_dyn(&positions)?)?;
        for block in [&self.block1, &self.block2] {
            h = block.forward_dyn(&h, None, true)?;
        }
        self.head.forward_dyn(&self.norm.forward_dyn(&h)?)
    }
}

/// Character <-> index maps of the text.
pub struct Vocabulary {
    chars: Vec<char>,
}

#[allow(clippy::len_without_is_empty)]
impl Vocabulary {
    pub fn of(text: &str) -> rumus::Result<Self> {
        let mut chars: Vec<char> = text.chars().collect();
        chars.sort_unstable();
        chars.dedup();
        if chars.len() > VOCAB {
            return Err(rumus::Error::InvalidArgument {
                op: "Vocabulary",
                message: format!(
                    "{} distinct characters, the model has room for {VOCAB}",
                    chars.len()
                ),
            });
        }
        Ok(Vocabulary { chars })
    }

    /// Number of distinct characters (at most `VOCAB`; the model's other outputs are unused).
    pub fn len(&self) -> usize {
        self.chars.len()
    }

    pub fn encode(&self, text: &str) -> Vec<i64> {
        text.chars()
            .map(|c| self.chars.binary_search(&c).map_or(0, |i| i as i64))
            .collect()
    }

    pub fn decode(&self, ids: &[i64]) -> String {
        ids.iter().map(|&i| self.chars[i as usize]).collect()
    }
}

/// `batch` random windows of `len + 1` characters: inputs and next-character targets.
pub fn sample_batch(
    data: &[i64],
    batch: usize,
    len: usize,
    rng: &mut Generator,
) -> rumus::Result<(DynTensor, DynTensor)> {
    let (mut inputs, mut targets) = (Vec::new(), Vec::new());
    for _ in 0..batch {
        let start = rng.below((data.len() - len - 1) as u64) as usize;
        inputs.extend_from_slice(&data[start..start + len]);
        targets.extend_from_slice(&data[start + 1..start + len + 1]);
    }
    Ok((
        DynTensor::from_vec(inputs, &[batch, len])?,
        DynTensor::from_vec(targets, &[batch * len])?,
    ))
}

/// Mean next-character cross-entropy of a batch.
pub fn loss(
    model: &CharTransformer,
    inputs: &DynTensor,
    targets: &DynTensor,
) -> rumus::Result<DynTensor> {
    let logits = model.forward(inputs)?;
    cross_entropy(
        &logits.reshape(&[targets.numel(), VOCAB])?,
        targets,
        &CrossEntropyOptions::default(),
    )
}

/// Continues `prompt` by `count` characters, sampling with `temperature`.
pub fn generate(
    model: &CharTransformer,
    vocabulary: &Vocabulary,
    prompt: &str,
    count: usize,
    temperature: f64,
    rng: &mut Generator,
) -> rumus::Result<String> {
    let _guard = rumus::no_grad();
    let mut ids = vocabulary.encode(prompt);
    for _ in 0..count {
        let context = &ids[ids.len().saturating_sub(BLOCK)..];
        let input = DynTensor::from_vec(context.to_vec(), &[1, context.len()])?
            .to(&model.head.weight.device())?;
        // Only the characters of the vocabulary can be sampled.
        let logits = model
            .forward(&input)?
            .narrow(1, context.len() - 1, 1)?
            .reshape(&[VOCAB])?
            .narrow(0, 0, vocabulary.len())?;
        let probs = logits
            .mul_scalar(1.0 / temperature)?
            .softmax(0)?
            .to_f64_vec();
        let mut pick = rng.next_f64();
        let next = probs.iter().position(|&p| {
            pick -= p;
            pick <= 0.0
        });
        ids.push(next.unwrap_or(probs.len() - 1) as i64);
    }
    Ok(vocabulary.decode(&ids))
}
