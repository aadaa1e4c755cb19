//! A GPT-2-style causal decoder: token and position embeddings, a stack of pre-norm blocks
//! (causal self-attention, GELU feed-forward, no dropout), a final norm, and the output
//! projection tied to the token embedding. The sizes are const generics; [`Gpt2Small`] is
//! GPT-2 small (124 M parameters with its vocabulary padded to 50,304) and [`TinyGpt`] a model
//! that trains in seconds on a CPU. Shared by the `gpt` example, its test and `bench_gpu`.

use rumus::amp::{GradScaler, autocast};
use rumus::nn::{
    CrossEntropyOptions, Embedding, FeedForwardActivation, LayerNorm, Module,
    TransformerEncoderBlock, cross_entropy,
};
use rumus::optim::{Adam, Optimizer};
use rumus::prelude::*;
use rumus::rng::Generator;

/// The causal decoder: `VOCAB` tokens, contexts of up to `CONTEXT`, width `WIDTH`, `HEADS` heads,
/// feed-forward width `FF`, and as many blocks as [`Gpt::new`] is given.
pub struct Gpt<
    const VOCAB: usize,
    const CONTEXT: usize,
    const WIDTH: usize,
    const HEADS: usize,
    const FF: usize,
> {
    token: Embedding<VOCAB, WIDTH>,
    position: Embedding<CONTEXT, WIDTH>,
    blocks: Vec<TransformerEncoderBlock<WIDTH, HEADS, FF>>,
    norm: LayerNorm<WIDTH>,
}

/// GPT-2 small: 12 blocks of width 768 with 12 heads, contexts of 1,024 tokens.
pub type Gpt2Small = Gpt<50304, 1024, 768, 12, 3072>;
/// GPT-2 small with its vocabulary cut to 8,192 tokens: every tensor fits a device whose
/// bindings stop at 128 MiB (lavapipe), where the 50,304-row embedding does not.
pub type Gpt2Small8k = Gpt<8192, 1024, 768, 12, 3072>;
/// A small decoder over bytes: 2 blocks of width 64, contexts of 64 bytes.
pub type TinyGpt = Gpt<256, 64, 64, 4, 256>;

impl<
    const VOCAB: usize,
    const CONTEXT: usize,
    const WIDTH: usize,
    const HEADS: usize,
    const FF: usize,
> Gpt<VOCAB, CONTEXT, WIDTH, HEADS, FF>
{
    /// `layers` blocks; the embeddings drawn from N(0, 0.02²) as GPT-2's are (the output
    /// projection shares the token embedding, so unit-variance rows would start the logits
    /// far from uniform).
    pub fn new(layers: usize) -> rumus::Result<Self> {
        let small = |weight: &DynTensor| weight.detach().mul_scalar(0.02)?.requires_grad_();
        let mut token = Embedding::new()?;
        token.weight = small(&token.weight)?;
        let mut position = Embedding::new()?;
        position.weight = small(&position.weight)?;
        let blocks = (0..layers)
            .map(|_| TransformerEncoderBlock::with_options(0.0, FeedForwardActivation::Gelu))
            .collect::<rumus::Result<_>>()?;
        Ok(Gpt {
            token,
            position,
            blocks,
            norm: LayerNorm::new()?,
        })
    }

    /// Logits `[B, T, VOCAB]` of the next token at every position of `ids` `[B, T]`.
    pub fn forward(&self, ids: &DynTensor) -> rumus::Result<DynTensor> {
        let t = ids.dims()[1];
        let positions = DynTensor::arange(0.0, t as f64, 1.0, DType::I64)?.to(&ids.device())?;
        let mut h = self
            .token
            .forward_dyn(ids)?
            .add(&self.position.forward_dyn(&positions)?)?;
        for block in &self.blocks {
            h = block.forward_dyn(&h, None, true)?;
        }
        // The tied output projection: the token embedding's rows score each token.
        self.norm.forward_dyn(&h)?.linear(&self.token.weight, None)
    }

    /// Mean next-token cross-entropy of `inputs` `[B, T]` against `targets` `[B T]`.
    pub fn loss(&self, inputs: &DynTensor, targets: &DynTensor) -> rumus::Result<DynTensor> {
        let logits = self.forward(inputs)?;
        cross_entropy(
            &logits.reshape(&[targets.numel(), VOCAB])?,
            targets,
            &CrossEntropyOptions::default(),
        )
    }

    /// One training step on a batch; with a `scaler`, the forward pass runs under f16
    /// autocast and the loss is scaled (the step is skipped on an overflow). Returns the loss,
    /// detached; reading it waits for the step.
    pub fn train_step(
        &self,
        optimizer: &mut Adam,
        scaler: Option<&mut GradScaler>,
        (inputs, targets): (&DynTensor, &DynTensor),
    ) -> rumus::Result<DynTensor> {
        let loss = {
            let _autocast = scaler.is_some().then(autocast);
            self.loss(inputs, targets)?
        };
        match scaler {
            Some(scaler) => {
                let mut grads = scaler.scale(&loss)?.backward()?;
                scaler.step(optimizer, &mut grads)?;
                scaler.update();
            }
            None => optimizer.step(&mut loss.backward()?)?,
        }
        Ok(loss.detach())
    }
}

impl<
    const VOCAB: usize,
    const CONTEXT: usize,
    const WIDTH: usize,
    const HEADS: usize,
    const FF: usize,
> Module for Gpt<VOCAB, CONTEXT, WIDTH, HEADS, FF>
{
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        self.token.visit(&format!("{prefix}token."), f);
        self.position.visit(&format!("{prefix}position."), f);
        for (i, block) in self.blocks.iter().enumerate() {
            block.visit(&format!("{prefix}blocks.{i}."), f);
        }
        self.norm.visit(&format!("{prefix}norm."), f);
    }

    fn set_training(&self, training: bool) {
        for block in &self.blocks {
            block.set_training(training);
        }
    }

    fn training(&self) -> Option<bool> {
        self.blocks.iter().find_map(|block| block.training())
    }

    fn describe(&self) -> String {
        format!(
            "Gpt(vocab={VOCAB}, context={CONTEXT}, width={WIDTH}, heads={HEADS}, ff={FF}, blocks={})",
            self.blocks.len()
        )
    }
}

/// `batch` random windows of `len + 1` tokens of `data`: inputs `[batch, len]` and
/// next-token targets `[batch len]`, on `device`.
pub fn sample_batch(
    data: &[i64],
    (batch, len): (usize, usize),
    rng: &mut Generator,
    device: &Device,
) -> rumus::Result<(DynTensor, DynTensor)> {
    if data.len() <= len + 1 {
        return Err(rumus::Error::InvalidArgument {
            op: "sample_batch",
            message: format!(
                "{} tokens cannot fill a window of {} (context and target): use a shorter \
                 context or more text",
                data.len(),
                len + 1
            ),
        });
    }
    let (mut inputs, mut targets) = (Vec::new(), Vec::new());
    for _ in 0..batch {
        let start = rng.below((data.len() - len - 1) as u64) as usize;
        inputs.extend_from_slice(&data[start..start + len]);
        targets.extend_from_slice(&data[start + 1..start + len + 1]);
    }
    Ok((
        DynTensor::from_vec(inputs, &[batch, len])?.to(device)?,
        DynTensor::from_vec(targets, &[batch * len])?.to(device)?,
    ))
}
