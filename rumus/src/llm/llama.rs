//! The Llama architecture as llama.cpp runs it from a GGUF file: token embedding, then per
//! block RMSNorm, causal self-attention with rotary positions and grouped key/value heads,
//! a residual, RMSNorm and a SwiGLU feed-forward, a residual; a final RMSNorm and the output
//! projection (the embedding again where the file has no `output.weight`).
//!
//! GGUF stores the query and key projections with each head's rows interleaved for rotation
//! of neighbouring pairs (llama.cpp's "normal" rope), which is how positions are applied
//! here; the scores equal those of the Hugging Face layout with its half-split rotation.

use super::cache::KvCache;
use super::config::LlamaConfig;
use super::invalid;
use super::sampling::Sampling;
use super::weights::{Matrix, Projections};
use crate::amp::{AutocastGuard, autocast_with};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::io::{GgmlType, GgufFile};
use crate::nn::functional::rms_norm;
use crate::ops::attention::SdpaOptions;
use crate::rng::Generator;
use crate::tensor::DynTensor;

/// One block's weights (`[out, in]` matrices, as `linear` takes them).
pub(super) struct Block {
    attn_norm: DynTensor,
    /// The query, key and value projections.
    qkv: Projections,
    attn_output: Matrix,
    ffn_norm: DynTensor,
    /// The feed-forward's gate and up projections.
    gate_up: Projections,
    down: Matrix,
}

/// How [`Llama::load`] holds the file's quantized matrices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightFormat {
    /// As the file stores them: `q4_0`, `q4_1` and `q8_0` matrices stay in their blocks and
    /// are multiplied as they are (a quarter to an eighth of f32's memory and memory
    /// traffic, with each activation block rounded to int8 as llama.cpp rounds it); other
    /// tensors in f32. k-quant matrices are multiplied as the nearest of those blocks
    /// (`q4_K` as `q4_1`; `q5_0`, `q5_1`, `q5_K` and `q6_K` as `q8_0`;
    /// [`GgufFile::quantized`](crate::io::GgufFile::quantized) says how near).
    AsStored,
    /// Every tensor dequantized to f32, multiplied in f32 (the file's values exactly, as
    /// PyTorch computes with them, at 4 to 7 times the memory).
    F32,
}

/// `name`'s dims `found` are the `expected` ones, or an error naming both.
pub(super) fn check_dims(name: &str, found: &[usize], expected: &[usize]) -> Result<()> {
    if found != expected {
        return Err(invalid(format!(
            "`{name}` is {found:?}; the configuration makes it {expected:?}"
        )));
    }
    Ok(())
}

/// A Llama model, its matrices in f32 or in the file's blocks ([`WeightFormat`]) on the CPU,
/// or dense on a GPU ([`Llama::to_device`]).
pub struct Llama {
    config: LlamaConfig,
    embedding: Matrix,
    blocks: Vec<Block>,
    output_norm: DynTensor,
    /// `None`: the embedding (tied weights).
    output: Option<Matrix>,
    /// Where its weights are, and where it computes.
    device: Device,
    /// The 16-bit dtype its matrices are held in, under whose autocast its products run;
    /// `None`: f32 (or blocks) and no autocast.
    half: Option<DType>,
}

impl Llama {
    /// The model in `file`, its quantized matrices kept in their blocks
    /// ([`WeightFormat::AsStored`]).
    ///
    /// # Errors
    /// As [`Llama::load`].
    pub fn from_gguf(file: &GgufFile) -> Result<Llama> {
        Llama::load(file, WeightFormat::AsStored)
    }

    /// The model in `file`, its matrices held as `format` says.
    ///
    /// # Errors
    /// A file of another architecture, a missing tensor, or one of other dims than the
    /// configuration implies (each named).
    pub fn load(file: &GgufFile, format: WeightFormat) -> Result<Llama> {
        let config = LlamaConfig::from_gguf(file)?;
        let check = |name: &str, dims: &[usize]| -> Result<()> {
            let info = file
                .tensor_info(name)
                .ok_or_else(|| invalid(format!("the file has no `{name}`")))?;
            check_dims(name, &info.dims, dims)
        };
        let vector = |name: &str, dims: &[usize]| -> Result<DynTensor> {
            check(name, dims)?;
            file.tensor(name)?.to_dtype(DType::F32)
        };
        let matrix = |name: &str, dims: &[usize]| -> Result<Matrix> {
            check(name, dims)?;
            let blocks = matches!(
                file.tensor_info(name).map(|i| i.ggml_type),
                Some(
                    GgmlType::Q4_0
                        | GgmlType::Q4_1
                        | GgmlType::Q8_0
                        | GgmlType::Q5_0
                        | GgmlType::Q5_1
                        | GgmlType::Q4K
                        | GgmlType::Q5K
                        | GgmlType::Q6K
                )
            );
            if blocks && format == WeightFormat::AsStored {
                return Ok(Matrix::Blocks(file.quantized(name)?));
            }
            Ok(Matrix::Dense(file.tensor(name)?.to_dtype(DType::F32)?))
        };
        let untied = file.tensor_info("output.weight").is_some();
        Llama::assemble(config, untied, &vector, &matrix)
    }

    /// The model from its tensors, fetched by their GGUF names (`blk.0.attn_q.weight`) with
    /// the dims the configuration gives them: `vector` the norms' weights, `matrix` the
    /// products' (the query and key rows in GGUF's order: each head's rotated pairs side by
    /// side); `untied`: whether there is an `output.weight` apart from the embedding.
    pub(super) fn assemble(
        config: LlamaConfig,
        untied: bool,
        vector: &dyn Fn(&str, &[usize]) -> Result<DynTensor>,
        matrix: &dyn Fn(&str, &[usize]) -> Result<Matrix>,
    ) -> Result<Llama> {
        let (d, kv, ff) = (
            config.width,
            config.kv_heads * config.head_width(),
            config.feed_forward,
        );
        let blocks = (0..config.blocks)
            .map(|i| {
                let name = |part: &str| format!("blk.{i}.{part}.weight");
                let w = |part: &str, dims: &[usize]| matrix(&name(part), dims);
                Ok(Block {
                    attn_norm: vector(&name("attn_norm"), &[d])?,
                    qkv: Projections::new(vec![
                        w("attn_q", &[d, d])?,
                        w("attn_k", &[kv, d])?,
                        w("attn_v", &[kv, d])?,
                    ])?,
                    attn_output: w("attn_output", &[d, d])?,
                    ffn_norm: vector(&name("ffn_norm"), &[d])?,
                    gate_up: Projections::new(vec![
                        w("ffn_gate", &[ff, d])?,
                        w("ffn_up", &[ff, d])?,
                    ])?,
                    down: w("ffn_down", &[d, ff])?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let output = if untied {
            Some(matrix("output.weight", &[config.vocab, d])?)
        } else {
            None
        };
        Ok(Llama {
            embedding: matrix("token_embd.weight", &[config.vocab, d])?,
            output_norm: vector("output_norm.weight", &[d])?,
            blocks,
            output,
            config,
            device: Device::Cpu,
            half: None,
        })
    }

    /// The model on `device` (a GPU through wgpu or CUDA, or the CPU), every matrix dense in
    /// `dtype` (f32, f16 or bf16; block-quantized ones expanded, as the GPU backends multiply
    /// dense matrices) and the norms' weights in f32; the token embedding stays on the host
    /// as it is, for the lookup (the output matrix, tied or not, is on the device). With a
    /// 16-bit `dtype` its products run under [`autocast_with`] in it (f32 accumulation and
    /// results, as PyTorch's f16 models compute): the activations and the key/value cache
    /// stay f32.
    ///
    /// ```no_run
    /// # fn main() -> rumus::Result<()> {
    /// let file = rumus::io::GgufFile::open("SmolLM2-135M-Instruct.Q4_1.gguf")?;
    /// let model = rumus::llm::Llama::from_gguf(&file)?.to_device(&rumus::Device::cuda()?, rumus::DType::F16)?;
    /// let next = model.generate_greedy(&[1, 2, 3], 16, None)?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// `dtype` not a floating-point dtype, or the device out of memory.
    pub fn to_device(&self, device: &Device, dtype: DType) -> Result<Llama> {
        if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(invalid(format!(
                "a model's matrices are f32, f16 or bf16 on a device, not {dtype:?}"
            )));
        }
        let matrix = |m: &Matrix| m.dense_on(device, dtype);
        let vector = |v: &DynTensor| v.to(device);
        let blocks = self
            .blocks
            .iter()
            .map(|b| {
                Ok(Block {
                    attn_norm: vector(&b.attn_norm)?,
                    qkv: b.qkv.dense_on(device, dtype)?,
                    attn_output: matrix(&b.attn_output)?,
                    ffn_norm: vector(&b.ffn_norm)?,
                    gate_up: b.gate_up.dense_on(device, dtype)?,
                    down: matrix(&b.down)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Llama {
            config: self.config.clone(),
            // Looked up on the host (a few rows a step, sent to the device): the GPU backends
            // gather f32 only. The device holds the output matrix, tied or not.
            embedding: self.embedding.clone(),
            blocks,
            output_norm: vector(&self.output_norm)?,
            output: Some(matrix(self.output.as_ref().unwrap_or(&self.embedding))?),
            device: device.clone(),
            half: (dtype != DType::F32).then_some(dtype),
        })
    }

    /// Where its weights are.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Autocast in its matrices' 16-bit dtype while the guard lives (none for f32 ones).
    pub(super) fn autocast(&self) -> Result<Option<AutocastGuard>> {
        self.half.map(autocast_with).transpose()
    }

    /// The model's configuration.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// Bytes its weights take in memory.
    pub fn weight_bytes(&self) -> usize {
        let vector = |t: &DynTensor| t.numel() * 4;
        let blocks: usize = self
            .blocks
            .iter()
            .map(|b| {
                b.qkv.bytes()
                    + b.gate_up.bytes()
                    + [&b.attn_output, &b.down]
                        .iter()
                        .map(|m| m.bytes())
                        .sum::<usize>()
                    + vector(&b.attn_norm)
                    + vector(&b.ffn_norm)
            })
            .sum();
        blocks
            + self.embedding.bytes()
            + self.output.as_ref().map_or(0, Matrix::bytes)
            + vector(&self.output_norm)
    }

    /// The next-token logits `[T, vocab]` after each of `tokens` (positions `0..T`).
    ///
    /// # Errors
    /// No tokens, or a token id outside the vocabulary.
    pub fn logits(&self, tokens: &[i64]) -> Result<DynTensor> {
        self.forward(tokens, &mut self.cache_with_capacity(tokens.len()))
    }

    /// An empty key/value cache for [`Llama::forward`], which grows as it fills.
    pub fn new_cache(&self) -> KvCache {
        self.cache_with_capacity(256)
    }

    /// An empty key/value cache with room for `tokens` tokens before it grows.
    pub fn cache_with_capacity(&self, tokens: usize) -> KvCache {
        KvCache::new(self.config.blocks, tokens)
    }

    /// The next-token logits `[T, vocab]` after each of `tokens`, which follow the
    /// `cache.len()` tokens the cache holds the keys and values of; their keys and values are
    /// added to it. Each token attends to the cached ones and to those before it in
    /// `tokens`.
    ///
    /// # Errors
    /// No tokens, or a token id outside the vocabulary.
    pub fn forward(&self, tokens: &[i64], cache: &mut KvCache) -> Result<DynTensor> {
        self.forward_batch(&[tokens], cache)?
            .reshape(&[tokens.len(), self.config.vocab])
    }

    /// [`Llama::forward`] of several sequences at once, each `sequences[i]` following the
    /// `cache.len()` tokens of sequence `i` that the cache holds: the next-token logits
    /// `[B, T, vocab]`. The sequences take the same number of tokens per call (a batch of
    /// prompts of one length, then a token each per step); the cache keeps them side by side
    /// (`[B, kv_heads, tokens, head_width]` a block), so it must be used with batches of
    /// the one size. The products run once for all `B T` rows.
    ///
    /// # Errors
    /// No sequences, sequences of different lengths, a cache of another batch size, or a
    /// token id outside the vocabulary.
    pub fn forward_batch(&self, sequences: &[&[i64]], cache: &mut KvCache) -> Result<DynTensor> {
        let (batch, t) = (sequences.len(), sequences.first().map_or(0, |s| s.len()));
        if batch == 0 {
            return Err(invalid("no sequences to run".into()));
        }
        if let Some(other) = sequences.iter().find(|s| s.len() != t) {
            return Err(invalid(format!(
                "the sequences of a batch take one length per call; got {t} and {} tokens \
                 (pad them, or run them apart)",
                other.len()
            )));
        }
        let tokens: Vec<i64> = sequences.iter().flat_map(|s| s.iter().copied()).collect();
        for sequence in sequences {
            self.check_tokens(sequence)?;
        }
        let _autocast = self.autocast()?;
        let mut x = self.embed(&tokens)?;
        let positions: Vec<usize> = (0..batch)
            .flat_map(|_| cache.len()..cache.len() + t)
            .collect();
        let rotation = Rotation::at(&self.config, &positions, &self.device)?;
        let mask = causal_after(cache.len(), t)?
            .map(|m| m.to(&self.device))
            .transpose()?;
        for (i, block) in self.blocks.iter().enumerate() {
            x = self.block(i, block, (&x, batch), &rotation, mask.as_ref(), cache)?;
        }
        cache.advance(t);
        self.head(&x)?.reshape(&[batch, t, self.config.vocab])
    }

    /// `tokens` are some, each in the vocabulary, or an error naming the first that is not.
    pub(super) fn check_tokens(&self, tokens: &[i64]) -> Result<()> {
        let vocab = self.config.vocab as i64;
        if tokens.is_empty() {
            return Err(invalid("no tokens to run".into()));
        }
        if let Some(bad) = tokens.iter().find(|&&t| !(0..vocab).contains(&t)) {
            return Err(invalid(format!(
                "token id {bad} is outside the vocabulary of {vocab}"
            )));
        }
        Ok(())
    }

    /// The embeddings of `tokens` (`[T, width]`, f32), the residual stream's start.
    pub(super) fn embed(&self, tokens: &[i64]) -> Result<DynTensor> {
        self.embedding.rows(tokens)?.to(&self.device)
    }

    /// The blocks' weights, in order.
    pub(super) fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The next-token logits `[T, vocab]` of the residual stream `x` after the last block.
    pub(super) fn head(&self, x: &DynTensor) -> Result<DynTensor> {
        let x = rms_norm(x, Some(&self.output_norm), self.config.rms_eps)?;
        self.output.as_ref().unwrap_or(&self.embedding).apply(&x)
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
        limits: (usize, Option<i64>),
        sampling: Sampling,
        rng: &mut Generator,
    ) -> Result<Vec<i64>> {
        let mut out = Vec::with_capacity(limits.0);
        self.generate_streaming(prompt, limits, sampling, rng, |token| {
            out.push(token);
            true
        })?;
        Ok(out)
    }

    /// [`Llama::generate`] handing each new token to `on_token` as soon as it is drawn (to
    /// print it, or to send it to a client); `on_token` returns `false` to stop there (a stop
    /// string seen, a client gone). Returns how many tokens it drew.
    ///
    /// # Errors
    /// As [`Llama::generate`].
    pub fn generate_streaming(
        &self,
        prompt: &[i64],
        (max_new, stop): (usize, Option<i64>),
        sampling: Sampling,
        rng: &mut Generator,
        mut on_token: impl FnMut(i64) -> bool,
    ) -> Result<usize> {
        sampling.check()?;
        let mut cache = self.cache_with_capacity(prompt.len() + max_new);
        let mut logits = self.forward(prompt, &mut cache)?;
        let mut drawn = 0;
        let mut history = prompt.to_vec();
        while drawn < max_new {
            let last = logits.narrow(0, logits.dims()[0] - 1, 1)?;
            let next = sampling.draw_after(&last.to_vec::<f32>()?, &history, rng);
            history.push(next);
            drawn += 1;
            if !on_token(next) || Some(next) == stop || drawn == max_new {
                break;
            }
            logits = self.forward(&[next], &mut cache)?;
        }
        Ok(drawn)
    }

    /// Block `index` of `b` on the residual stream `x` (`[B T, width]`, `batch` sequences of
    /// `T` rows each).
    fn block(
        &self,
        index: usize,
        b: &Block,
        (x, batch): (&DynTensor, usize),
        rotation: &Rotation,
        mask: Option<&DynTensor>,
        cache: &mut KvCache,
    ) -> Result<DynTensor> {
        let c = &self.config;
        let t = x.dims()[0] / batch;
        let (hw, group) = (c.head_width(), c.heads / c.kv_heads);
        // A batch's tensors lead with the batch axis; one sequence's have none (the 3-D
        // shapes the CPU kernels were tuned on: a leading axis of one cost 7% of a two-thread
        // decode).
        let lead: &[usize] = if batch == 1 { &[] } else { &[batch] };
        let dims = |rest: &[usize]| -> Vec<usize> { lead.iter().chain(rest).copied().collect() };
        // [B T, heads, hw] -> [B, heads, T, hw]; this pass's keys and values, [B, kv_heads,
        // T, hw], written after the cached ones.
        let split = |y: &DynTensor, heads: usize| -> Result<DynTensor> {
            y.reshape(&dims(&[t, heads, hw]))?.transpose(-3, -2)
        };
        let [q, k, v] = self.projections(b, x, rotation)?;
        let (q, k, v) = (
            split(&q, c.heads)?,
            split(&k, c.kv_heads)?,
            split(&v, c.kv_heads)?,
        );
        let (k, v) = cache.append(index, &k, &v)?;
        // Key and value head j serves query heads j * group .. (j + 1) * group.
        let s = k.dims()[k.rank() - 2];
        if t == 1 {
            // One query per head: a key/value head's `group` query heads are its `group` rows
            // of queries, so the cached keys and values are read in place, not repeated.
            let attended = q
                .reshape(&dims(&[c.kv_heads, group, hw]))?
                .scaled_dot_product_attention(&k, &v, SdpaOptions::default())?
                .reshape(&[batch, c.width])?;
            return self.attended(b, x, &attended);
        }
        let grouped = |y: &DynTensor| -> Result<DynTensor> {
            y.unsqueeze(-3)?
                .broadcast_to(&dims(&[c.kv_heads, group, s, hw]))?
                .reshape(&dims(&[c.heads, s, hw]))
        };
        let (k, v) = (grouped(&k)?, grouped(&v)?);
        let attended = match mask {
            // A prompt's queries see the keys up to their own; one query sees them all.
            None => q.scaled_dot_product_attention(
                &k,
                &v,
                SdpaOptions {
                    causal: t > 1,
                    ..Default::default()
                },
            )?,
            Some(mask) => {
                let scale = 1.0 / (hw as f64).sqrt();
                let scores = q.matmul(&k.transpose(-1, -2)?)?.mul_scalar(scale)?;
                scores.add(mask)?.softmax(-1)?.matmul(&v)?
            }
        };
        let attended = attended.transpose(-3, -2)?.reshape(&[batch * t, c.width])?;
        self.attended(b, x, &attended)
    }

    /// The block's queries `[T, heads, hw]`, keys and values `[T, kv_heads, hw]` of the
    /// residual stream `x` (`[T, width]`), queries and keys rotated to their positions.
    pub(super) fn projections(
        &self,
        b: &Block,
        x: &DynTensor,
        rotation: &Rotation,
    ) -> Result<[DynTensor; 3]> {
        let c = &self.config;
        let (t, hw) = (x.dims()[0], c.head_width());
        let h = rms_norm(x, Some(&b.attn_norm), c.rms_eps)?;
        let [q, k, v]: [DynTensor; 3] = b.qkv.apply(&h)?.try_into().expect("three projections");
        let q = rotation.apply(&q.reshape(&[t, c.heads, hw])?)?;
        let k = rotation.apply(&k.reshape(&[t, c.kv_heads, hw])?)?;
        let v = v.reshape(&[t, c.kv_heads, hw])?;
        Ok([q, k, v])
    }

    /// The rest of the block once attention has given `attended` (`[T, width]`, heads side
    /// by side): the output projection added to `x`, then the feed-forward half.
    pub(super) fn attended(
        &self,
        b: &Block,
        x: &DynTensor,
        attended: &DynTensor,
    ) -> Result<DynTensor> {
        self.feed_forward(b, &x.add(&b.attn_output.apply(attended)?)?)
    }

    /// The block's second half: `x + down(silu(gate(h)) * up(h))`, `h = rms_norm(x)`.
    fn feed_forward(&self, b: &Block, x: &DynTensor) -> Result<DynTensor> {
        let h = rms_norm(x, Some(&b.ffn_norm), self.config.rms_eps)?;
        let [gate, up]: [DynTensor; 2] = b.gate_up.apply(&h)?.try_into().expect("two projections");
        let hidden = gate.silu()?.mul(&up)?;
        x.add(&b.down.apply(&hidden)?)
    }
}

/// The additive mask of `new` queries after `past` cached keys (`[new, past + new]`: query
/// `i` sees keys up to `past + i`), or `None` where attention's own causal mask serves (no
/// cached keys) or none is needed (one query sees every key).
fn causal_after(past: usize, new: usize) -> Result<Option<DynTensor>> {
    if new == 1 || past == 0 {
        return Ok(None);
    }
    let values: Vec<f32> = (0..new)
        .flat_map(|i| {
            (0..past + new).map(move |j| {
                if j <= past + i {
                    0.0
                } else {
                    f32::NEG_INFINITY
                }
            })
        })
        .collect();
    Ok(Some(DynTensor::from_vec(values, &[new, past + new])?))
}

/// The rotary position embedding of one position per row: pair `i` of a head (its
/// elements `2i`, `2i + 1`) at position `p` turns by `p base^(-2i / head_width)`.
pub(super) struct Rotation {
    cos: DynTensor,
    sin: DynTensor,
}

impl Rotation {
    /// The rotation of rows at `positions` (one per row, in any order: a batch of
    /// sequences at different lengths), its tables on `device`.
    pub(super) fn at(c: &LlamaConfig, positions: &[usize], device: &Device) -> Result<Rotation> {
        let (pairs, t) = (c.head_width() / 2, positions.len());
        let angle = |p: usize, i: usize| {
            p as f64 * c.rope_base.powf(-2.0 * i as f64 / c.head_width() as f64)
        };
        let table = |f: fn(f64) -> f64| -> Result<DynTensor> {
            let values: Vec<f32> = positions
                .iter()
                .flat_map(|&p| (0..pairs).map(move |i| f(angle(p, i)) as f32))
                .collect();
            // [T, 1, pairs, 1]: broadcast over heads and the pair's two elements.
            DynTensor::from_vec(values, &[t, 1, pairs, 1])?.to(device)
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
