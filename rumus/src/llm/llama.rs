//! The Llama architecture as llama.cpp runs it from a GGUF file: token embedding, then per
//! block RMSNorm, causal self-attention with rotary positions and grouped key/value heads,
//! a residual, RMSNorm and a SwiGLU feed-forward, a residual; a final RMSNorm and the output
//! projection (the embedding again where the file has no `output.weight`).
//!
//! Weights are dequantized to `f32` when the model loads. GGUF stores the query and key
//! projections with each head's rows interleaved for rotation of neighbouring pairs
//! (llama.cpp's "normal" rope), which is how positions are applied here; the scores equal
//! those of the Hugging Face layout with its half-split rotation.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::io::{GgufFile, GgufValue};
use crate::nn::functional::rms_norm;
use crate::ops::attention::SdpaOptions;
use crate::rng::Generator;
use crate::tensor::DynTensor;

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
        if !width.is_multiple_of(heads)
            || !heads.is_multiple_of(kv_heads)
            || (width / heads) % 2 != 0
        {
            return Err(invalid(format!(
                "{heads} query heads and {kv_heads} key/value heads do not split a width of \
                 {width} into heads of an even width"
            )));
        }
        Ok(config)
    }

    /// Width of one head.
    pub fn head_width(&self) -> usize {
        self.width / self.heads
    }
}

fn invalid(message: String) -> Error {
    Error::InvalidArgument {
        op: "Llama",
        message,
    }
}

/// One block's weights (`[out, in]` matrices, as `linear` takes them).
struct Block {
    attn_norm: DynTensor,
    q: DynTensor,
    k: DynTensor,
    v: DynTensor,
    attn_output: DynTensor,
    ffn_norm: DynTensor,
    gate: DynTensor,
    up: DynTensor,
    down: DynTensor,
}

/// How [`Llama::generate`] picks each next token from its logits: the most likely one at
/// temperature 0; otherwise a draw from `softmax(logits / temperature)`, restricted first to
/// the `top_k` most likely tokens and then to the fewest most likely ones whose probabilities
/// sum to `top_p` (nucleus sampling), renormalised, as Hugging Face's `generate` samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// 0 (greedy) or more; below 1 sharpens the distribution, above flattens it.
    pub temperature: f64,
    /// Keep only the `k` most likely tokens (`None`: all).
    pub top_k: Option<usize>,
    /// Keep the smallest set of most likely tokens with probability `p` or more (in `(0, 1]`;
    /// `None`: all).
    pub top_p: Option<f64>,
}

impl Default for Sampling {
    /// Plain sampling at temperature 1.
    fn default() -> Self {
        Sampling {
            temperature: 1.0,
            top_k: None,
            top_p: None,
        }
    }
}

impl Sampling {
    fn check(&self) -> Result<()> {
        let bad = |what: String| Err(invalid(format!("sampling: {what}")));
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return bad(format!(
                "temperature {} is not finite and >= 0",
                self.temperature
            ));
        }
        if self.top_k == Some(0) {
            return bad("top_k 0 keeps no token".into());
        }
        if let Some(p) = self.top_p
            && !(p > 0.0 && p <= 1.0)
        {
            return bad(format!("top_p {p} is outside (0, 1]"));
        }
        Ok(())
    }

    /// The probabilities sampling draws from, by token (zeros for the tokens cut away).
    pub fn probabilities(&self, logits: &[f32]) -> Vec<f64> {
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        let mut probs = vec![0.0; logits.len()];
        let Some(&best) = order.first() else {
            return probs;
        };
        if self.temperature == 0.0 {
            probs[best] = 1.0;
            return probs;
        }
        let top = f64::from(logits[best]);
        let keep = self.top_k.unwrap_or(order.len()).min(order.len());
        let weights: Vec<f64> = order[..keep]
            .iter()
            .map(|&i| ((f64::from(logits[i]) - top) / self.temperature).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let mut kept = keep;
        if let Some(p) = self.top_p {
            let mut sum = 0.0;
            kept = weights
                .iter()
                .position(|w| {
                    sum += w / total;
                    sum >= p
                })
                .map_or(keep, |last| last + 1);
        }
        let total: f64 = weights[..kept].iter().sum();
        for (&i, w) in order[..kept].iter().zip(&weights) {
            probs[i] = w / total;
        }
        probs
    }

    /// One token drawn from [`Sampling::probabilities`] with `rng`.
    pub fn draw(&self, logits: &[f32], rng: &mut Generator) -> i64 {
        let probs = self.probabilities(logits);
        let u = rng.next_f64();
        let mut sum = 0.0;
        let mut last = 0;
        for (i, &p) in probs.iter().enumerate() {
            if p == 0.0 {
                continue;
            }
            sum += p;
            last = i;
            if u < sum {
                return i as i64;
            }
        }
        last as i64
    }
}

/// The keys and values of the tokens a [`Llama`] has run, per block (`[kv_heads, T, hw]`,
/// keys rotated), so that each new token attends to them without running them again.
#[derive(Clone)]
pub struct KvCache {
    layers: Vec<Option<(DynTensor, DynTensor)>>,
    len: usize,
}

impl KvCache {
    /// Tokens whose keys and values the cache holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// A Llama model with its weights in `f32` on the CPU.
pub struct Llama {
    config: LlamaConfig,
    embedding: DynTensor,
    blocks: Vec<Block>,
    output_norm: DynTensor,
    /// `None`: the embedding (tied weights).
    output: Option<DynTensor>,
}

impl Llama {
    /// The model in `file`, its weights dequantized to `f32`.
    ///
    /// # Errors
    /// A file of another architecture, a missing tensor, or one of other dims than the
    /// configuration implies (each named).
    pub fn from_gguf(file: &GgufFile) -> Result<Llama> {
        let config = LlamaConfig::from_gguf(file)?;
        let (d, kv, ff) = (
            config.width,
            config.kv_heads * config.head_width(),
            config.feed_forward,
        );
        let load = |name: &str, dims: &[usize]| -> Result<DynTensor> {
            let t = file.tensor(name)?;
            if t.dims() != dims {
                return Err(invalid(format!(
                    "`{name}` is {:?}; the configuration makes it {dims:?}",
                    t.dims()
                )));
            }
            t.to_dtype(DType::F32)
        };
        let blocks = (0..config.blocks)
            .map(|i| {
                let w = |part: &str, dims: &[usize]| load(&format!("blk.{i}.{part}.weight"), dims);
                Ok(Block {
                    attn_norm: w("attn_norm", &[d])?,
                    q: w("attn_q", &[d, d])?,
                    k: w("attn_k", &[kv, d])?,
                    v: w("attn_v", &[kv, d])?,
                    attn_output: w("attn_output", &[d, d])?,
                    ffn_norm: w("ffn_norm", &[d])?,
                    gate: w("ffn_gate", &[ff, d])?,
                    up: w("ffn_up", &[ff, d])?,
                    down: w("ffn_down", &[d, ff])?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let output = match file.tensor_info("output.weight") {
            Some(_) => Some(load("output.weight", &[config.vocab, d])?),
            None => None,
        };
        Ok(Llama {
            embedding: load("token_embd.weight", &[config.vocab, d])?,
            output_norm: load("output_norm.weight", &[d])?,
            blocks,
            output,
            config,
        })
    }

    /// The model's configuration.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The next-token logits `[T, vocab]` after each of `tokens` (positions `0..T`).
    ///
    /// # Errors
    /// No tokens, or a token id outside the vocabulary.
    pub fn logits(&self, tokens: &[i64]) -> Result<DynTensor> {
        self.forward(tokens, &mut self.new_cache())
    }

    /// An empty key/value cache for [`Llama::forward`].
    pub fn new_cache(&self) -> KvCache {
        KvCache {
            layers: vec![None; self.config.blocks],
            len: 0,
        }
    }

    /// The next-token logits `[T, vocab]` after each of `tokens`, which follow the
    /// `cache.len()` tokens the cache holds the keys and values of; their keys and values are
    /// added to it. A prompt runs in one pass; later tokens (generation) one at a time.
    ///
    /// # Errors
    /// No tokens, or a token id outside the vocabulary.
    pub fn forward(&self, tokens: &[i64], cache: &mut KvCache) -> Result<DynTensor> {
        let vocab = self.config.vocab as i64;
        if tokens.is_empty() {
            return Err(invalid("no tokens to run".into()));
        }
        if let Some(bad) = tokens.iter().find(|&&t| !(0..vocab).contains(&t)) {
            return Err(invalid(format!(
                "token id {bad} is outside the vocabulary of {vocab}"
            )));
        }
        if cache.len > 0 && tokens.len() > 1 {
            // (queries after cached keys see all of them: one at a time, no causal mask)
            let rows = tokens
                .iter()
                .map(|&t| self.forward(&[t], cache))
                .collect::<Result<Vec<_>>>()?;
            return DynTensor::cat(&rows.iter().collect::<Vec<_>>(), 0);
        }
        let ids = DynTensor::from_vec(tokens.to_vec(), &[tokens.len()])?;
        let mut x = self.embedding.index_select(0, &ids)?;
        let rotation = Rotation::new(&self.config, cache.len, tokens.len())?;
        for (block, kv) in self.blocks.iter().zip(&mut cache.layers) {
            x = self.block(block, &x, &rotation, kv)?;
        }
        cache.len += tokens.len();
        let x = rms_norm(&x, Some(&self.output_norm), self.config.rms_eps)?;
        x.linear(self.output.as_ref().unwrap_or(&self.embedding), None)
    }

    /// `prompt` continued by up to `max_new` tokens, each the most likely next one (greedy
    /// decoding), stopping after `stop` if it comes: the new tokens only.
    ///
    /// # Errors
    /// As [`Llama::forward`].
    pub fn generate_greedy(
        &self,
        prompt: &[i64],
        max_new: usize,
        stop: Option<i64>,
    ) -> Result<Vec<i64>> {
        let greedy = Sampling {
            temperature: 0.0,
            ..Sampling::default()
        };
        self.generate(prompt, (max_new, stop), greedy, &mut Generator::new(0))
    }

    /// `prompt` continued by up to `max_new` tokens drawn by `sampling` from `rng`, stopping
    /// after `stop` if it comes: the new tokens only.
    ///
    /// # Errors
    /// As [`Llama::forward`], or `sampling` out of its ranges.
    pub fn generate(
        &self,
        prompt: &[i64],
        (max_new, stop): (usize, Option<i64>),
        sampling: Sampling,
        rng: &mut Generator,
    ) -> Result<Vec<i64>> {
        sampling.check()?;
        let mut cache = self.new_cache();
        let mut logits = self.forward(prompt, &mut cache)?;
        let mut out = Vec::with_capacity(max_new);
        while out.len() < max_new {
            let last = logits.narrow(0, logits.dims()[0] - 1, 1)?;
            let next = sampling.draw(&last.to_vec::<f32>()?, rng);
            out.push(next);
            if Some(next) == stop || out.len() == max_new {
                break;
            }
            logits = self.forward(&[next], &mut cache)?;
        }
        Ok(out)
    }

    fn block(
        &self,
        b: &Block,
        x: &DynTensor,
        rotation: &Rotation,
        kv: &mut Option<(DynTensor, DynTensor)>,
    ) -> Result<DynTensor> {
        let c = &self.config;
        let t = x.dims()[0];
        let (hw, group) = (c.head_width(), c.heads / c.kv_heads);
        let h = rms_norm(x, Some(&b.attn_norm), c.rms_eps)?;
        // [T, heads, hw] -> [heads, T, hw]
        let q = rotation
            .apply(&h.linear(&b.q, None)?.reshape(&[t, c.heads, hw])?)?
            .transpose(0, 1)?;
        // This pass's keys and values, [kv_heads, T, hw], after the cached ones.
        let k = rotation
            .apply(&h.linear(&b.k, None)?.reshape(&[t, c.kv_heads, hw])?)?
            .transpose(0, 1)?;
        let v = h
            .linear(&b.v, None)?
            .reshape(&[t, c.kv_heads, hw])?
            .transpose(0, 1)?;
        let (k, v) = match kv.take() {
            Some((past_k, past_v)) => (
                DynTensor::cat(&[&past_k, &k], 1)?,
                DynTensor::cat(&[&past_v, &v], 1)?,
            ),
            None => (k.contiguous()?, v.contiguous()?),
        };
        *kv = Some((k.clone(), v.clone()));
        // Key and value head j serves query heads j * group .. (j + 1) * group.
        let s = k.dims()[1];
        let grouped = |y: &DynTensor| -> Result<DynTensor> {
            y.reshape(&[c.kv_heads, 1, s, hw])?
                .broadcast_to(&[c.kv_heads, group, s, hw])?
                .reshape(&[c.heads, s, hw])
        };
        let (k, v) = (grouped(&k)?, grouped(&v)?);
        let options = SdpaOptions {
            // A prompt's queries see the keys up to their own; one query after cached keys
            // sees them all.
            causal: t > 1,
            ..Default::default()
        };
        let attended = q
            .scaled_dot_product_attention(&k, &v, options)?
            .transpose(0, 1)?
            .reshape(&[t, c.width])?;
        let x = x.add(&attended.linear(&b.attn_output, None)?)?;
        let h = rms_norm(&x, Some(&b.ffn_norm), c.rms_eps)?;
        let hidden = h
            .linear(&b.gate, None)?
            .silu()?
            .mul(&h.linear(&b.up, None)?)?;
        x.add(&hidden.linear(&b.down, None)?)
    }
}

/// The rotary position embedding of positions `start..start + T`: pair `i` of a head (its
/// elements `2i`, `2i + 1`) at position `p` turns by `p base^(-2i / head_width)`.
struct Rotation {
    cos: DynTensor,
    sin: DynTensor,
}

impl Rotation {
    fn new(c: &LlamaConfig, start: usize, t: usize) -> Result<Rotation> {
        let pairs = c.head_width() / 2;
        let angle = |p: usize, i: usize| {
            p as f64 * c.rope_base.powf(-2.0 * i as f64 / c.head_width() as f64)
        };
        let table = |f: fn(f64) -> f64| -> Result<DynTensor> {
            let values: Vec<f32> = (start..start + t)
                .flat_map(|p| (0..pairs).map(move |i| f(angle(p, i)) as f32))
                .collect();
            // [T, 1, pairs, 1]: broadcast over heads and the pair's two elements.
            Ok(DynTensor::from_vec(values, &[t, 1, pairs, 1])?)
        };
        Ok(Rotation {
            cos: table(f64::cos)?,
            sin: table(f64::sin)?,
        })
    }

    /// `x` (`[T, heads, hw]`) rotated.
    fn apply(&self, x: &DynTensor) -> Result<DynTensor> {
        let dims = x.dims().to_vec();
        let pairs = x.reshape(&[dims[0], dims[1], dims[2] / 2, 2])?;
        let (even, odd) = (pairs.narrow(-1, 0, 1)?, pairs.narrow(-1, 1, 1)?);
        let turned_even = even.mul(&self.cos)?.sub(&odd.mul(&self.sin)?)?;
        let turned_odd = even.mul(&self.sin)?.add(&odd.mul(&self.cos)?)?;
        DynTensor::cat(&[&turned_even, &turned_odd], -1)?.reshape(&dims)
    }
}
