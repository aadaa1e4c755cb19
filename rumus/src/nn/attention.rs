//! Multi-head attention and a pre-norm transformer encoder block, batch first, with PyTorch's
//! parameter layout and names (`torch.nn.MultiheadAttention`,
//! `torch.nn.TransformerEncoderLayer(norm_first=True, batch_first=True)`), so PyTorch weights
//! load by name.
//!
//! Both are composites of differentiable ops; gradients of any order come from the tape. On a
//! GPU, attention over long sequences whose weights are not asked for runs the fused kernel
//! of [`DynTensor::scaled_dot_product_attention`] instead (no `[T, S]` matrix in memory).

use super::dropout::Dropout;
use super::functional::dropout;
use super::linear::Linear;
use super::mode::TrainingFlag;
use super::module::Module;
use super::norm::LayerNorm;
use crate::dtype::DType;
use crate::error::{Error, Result, ShapeError};
pub use crate::ops::mask::causal_mask;
use crate::ops::unary::UnaryOp;
use crate::tensor::DynTensor;

/// The parameters of multi-head attention in PyTorch's layout: `in_proj_weight` `[3E, E]`
/// (the query, key and value projections stacked along the rows), `in_proj_bias` `[3E]`,
/// `out_proj_weight` `[E, E]`, `out_proj_bias` `[E]`.
#[derive(Debug, Clone, Copy)]
pub struct AttentionWeights<'a> {
    /// The query, key and value projections stacked along the rows, `[3E, E]`.
    pub in_proj_weight: &'a DynTensor,
    /// Bias of the stacked projections, `[3E]`, if any.
    pub in_proj_bias: Option<&'a DynTensor>,
    /// Output projection, `[E, E]`.
    pub out_proj_weight: &'a DynTensor,
    /// Bias of the output projection, `[E]`, if any.
    pub out_proj_bias: Option<&'a DynTensor>,
}

/// Masking and dropout of [`multi_head_attention`].
#[derive(Debug, Clone, Copy, Default)]
pub struct AttentionOptions<'a> {
    /// `[T, S]` or `[B * heads, T, S]` (PyTorch's layouts). A `bool` mask marks with `true`
    /// the positions that may *not* be attended (PyTorch's convention); a float mask (of the
    /// query's dtype) is added to the scores.
    pub attn_mask: Option<&'a DynTensor>,
    /// Query `i` attends only to keys `j <= i` (combined with `attn_mask` when both are set).
    pub causal: bool,
    /// Dropout probability on the attention weights, applied when `training`.
    pub dropout: f64,
    /// Whether to apply `dropout` (training mode); no dropout when `false`.
    pub training: bool,
}

fn invalid(message: String) -> Error {
    ShapeError::Invalid {
        context: "multi_head_attention".into(),
        message,
    }
    .into()
}

fn check_heads(embed: usize, heads: usize) -> Result<()> {
    if heads == 0 || !embed.is_multiple_of(heads) {
        return Err(Error::InvalidArgument {
            op: "multi_head_attention",
            message: format!(
                "the embedding size {embed} must be divisible by the number of heads {heads}"
            ),
        });
    }
    Ok(())
}

/// Checks the shapes of every operand; returns `(embed, batch, target len, source len)`.
fn check_attention_shapes(
    query: &DynTensor,
    key: &DynTensor,
    value: &DynTensor,
    heads: usize,
    w: &AttentionWeights,
    mask: Option<&DynTensor>,
) -> Result<(usize, usize, usize, usize)> {
    let wi = w.in_proj_weight.dims();
    if wi.len() != 2 || wi[0] != 3 * wi[1] {
        return Err(invalid(format!(
            "in_proj_weight must be [3 * embed, embed], got {wi:?}"
        )));
    }
    let e = wi[1];
    check_heads(e, heads)?;
    let expect = |name: &str, t: Option<&DynTensor>, dims: &[usize]| match t {
        Some(t) if t.dims() != dims => Err(invalid(format!(
            "{name} must be {dims:?}, got {:?}",
            t.dims()
        ))),
        _ => Ok(()),
    };
    expect("in_proj_bias", w.in_proj_bias, &[3 * e])?;
    expect("out_proj.weight", Some(w.out_proj_weight), &[e, e])?;
    expect("out_proj.bias", w.out_proj_bias, &[e])?;
    for (name, t) in [("query", query), ("key", key), ("value", value)] {
        if t.rank() != 3 || t.dims()[2] != e {
            return Err(invalid(format!(
                "{name} must be [batch, length, {e}] (batch first), got {:?}",
                t.dims()
            )));
        }
    }
    if key.dims() != value.dims() || key.dims()[0] != query.dims()[0] {
        return Err(invalid(format!(
            "query {:?}, key {:?} and value {:?} must share the batch size, and key and value \
             the length",
            query.dims(),
            key.dims(),
            value.dims()
        )));
    }
    let (b, t, s) = (query.dims()[0], query.dims()[1], key.dims()[1]);
    if let Some(m) = mask {
        if m.dims() != [t, s] && m.dims() != [b * heads, t, s] {
            return Err(invalid(format!(
                "attn_mask must be [{t}, {s}] or [{}, {t}, {s}], got {:?}",
                b * heads,
                m.dims()
            )));
        }
        if m.dtype() != DType::Bool && m.dtype() != query.dtype() {
            return Err(Error::DType {
                op: "multi_head_attention",
                expected: "a bool attn_mask or a float one of the query's dtype",
                found: m.dtype(),
            });
        }
    }
    Ok((e, b, t, s))
}

/// Multi-head attention as PyTorch's `MultiheadAttention` computes it (batch first): `query`
/// `[B, T, E]`, `key` and `value` `[B, S, E]`, `heads` dividing `E`.
///
/// `q, k, v` are the three row blocks of `in_proj_weight` applied to query, key and value,
/// split into `heads` heads of size `E / heads`; each head computes
/// `softmax(q k^T / sqrt(E / heads) + mask) v`; the heads are concatenated and `out_proj`
/// applied. Returns the output `[B, T, E]` and the attention weights of every head
/// `[B, heads, T, S]` (after dropout, as PyTorch returns them). A query that `attn_mask`
/// lets see no key gets NaN weights and output, as from PyTorch's `need_weights=True`
/// (an explicit softmax); [`MultiheadAttention::forward_dyn`], which returns no weights,
/// gives it zeros before `out_proj`, as PyTorch's `need_weights=False` does.
pub fn multi_head_attention(
    query: &DynTensor,
    key: &DynTensor,
    value: &DynTensor,
    heads: usize,
    weights: AttentionWeights,
    options: AttentionOptions,
) -> Result<(DynTensor, DynTensor)> {
    let projected = Heads::project(query, key, value, heads, &weights, options.attn_mask)?;
    attend(projected, &weights, options, UnseenRows::Nan)
}

/// What a query that sees no key gets: softmax's NaN (PyTorch's `need_weights=True`) or
/// zeros (its `need_weights=False`, which runs `scaled_dot_product_attention`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum UnseenRows {
    Nan,
    Zeros,
}

/// [`multi_head_attention`] of the projected `heads`, a query that sees no key getting
/// `unseen`.
fn attend(
    heads: Heads,
    weights: &AttentionWeights,
    options: AttentionOptions,
    unseen: UnseenRows,
) -> Result<(DynTensor, DynTensor)> {
    let mut scores = heads.q.matmul(&heads.k.transpose(-1, -2)?)?;
    let (b, t, s) = (heads.batch, heads.t, heads.s);
    if let Some(mask) = options.attn_mask {
        let mask = if mask.rank() == 3 {
            mask.reshape(&[b, heads.count, t, s])?
        } else {
            mask.clone()
        };
        scores = if mask.dtype() == DType::Bool {
            scores.masked_fill(&mask, f64::NEG_INFINITY)?
        } else {
            scores.add(&mask)?
        };
    }
    if options.causal {
        scores =
            scores.masked_fill(&causal_mask(t, s)?.to(&scores.device())?, f64::NEG_INFINITY)?;
    }
    // (only an `attn_mask` hides every key from a query: the causal mask leaves it key 0)
    let probabilities = if unseen == UnseenRows::Zeros && options.attn_mask.is_some() {
        crate::ops::softmax::softmax_zeroing_unseen_rows(&scores)?
    } else {
        scores.softmax(-1)?
    };
    let attention = dropout(&probabilities, options.dropout, options.training)?;
    let out = heads.merge(&attention.matmul(&heads.v)?, weights)?;
    Ok((out, attention))
}

/// Queries (shorter than this) attend through the composite form even where the fused f32
/// kernel could run: on an H200 the composite form of the benchmark's `[32, 8, 256, 64]`
/// attention was the faster one. On the matrix units (autocast) the fused kernel runs at
/// every length, dropout included: at that shape on an H200 its forward and backward take
/// 4.4 ms against the composite form's 4.8 (`bench_gpu ops`), with no `[T, S]` matrix.
const FUSED_MIN_LENGTH: usize = 512;

/// The output of [`multi_head_attention`] without its weights. On a GPU, without an
/// `attn_mask`, long sequences take the fused kernel
/// ([`DynTensor::scaled_dot_product_attention`], which drops out the same probabilities),
/// which keeps no `[T, S]` matrix.
pub(crate) fn multi_head_attention_output(
    query: &DynTensor,
    key: &DynTensor,
    value: &DynTensor,
    heads: usize,
    weights: AttentionWeights,
    options: AttentionOptions,
) -> Result<DynTensor> {
    let fused = query.device().is_gpu()
        && options.attn_mask.is_none()
        // (dropout of every probability is the composite form's: zeros)
        && (options.dropout < 1.0 || !options.training)
        && query.rank() == 3
        && (query.dims()[1] >= FUSED_MIN_LENGTH
            || (crate::ops::attention::on_matrix_units(&query.device(), query.dims()[2] / heads)
                // (past this dropout the fused attention runs its f32 kernels)
                && (!options.training
                    || options.dropout <= crate::ops::attention::MAX_HALF_DROPOUT)));
    let heads = Heads::project(query, key, value, heads, &weights, options.attn_mask)?;
    if !fused {
        return Ok(attend(heads, &weights, options, UnseenRows::Zeros)?.0);
    }
    let sdpa = crate::ops::attention::SdpaOptions {
        causal: options.causal,
        // The queries carry the scale already.
        scale: Some(1.0),
        dropout_p: if options.training {
            options.dropout
        } else {
            0.0
        },
        ..Default::default()
    };
    let attended = heads
        .q
        .scaled_dot_product_attention(&heads.k, &heads.v, sdpa)?;
    heads.merge(&attended, &weights)
}

/// Queries, keys and values projected and split into heads, `[B, heads, L, E / heads]`; the
/// queries already multiplied by `1 / sqrt(E / heads)`.
struct Heads {
    q: DynTensor,
    k: DynTensor,
    v: DynTensor,
    count: usize,
    batch: usize,
    t: usize,
    s: usize,
}

impl Heads {
    fn project(
        query: &DynTensor,
        key: &DynTensor,
        value: &DynTensor,
        heads: usize,
        weights: &AttentionWeights,
        attn_mask: Option<&DynTensor>,
    ) -> Result<Self> {
        let (e, b, t, s) = check_attention_shapes(query, key, value, heads, weights, attn_mask)?;
        let head_dim = e / heads;
        let w = weights.in_proj_weight.chunk(3, 0)?;
        let bias = weights
            .in_proj_bias
            .map(|bias| bias.chunk(3, 0))
            .transpose()?;
        let bias_of = |i: usize| bias.as_ref().map(|parts| &parts[i]);
        // [B, L, E] -> [B, heads, L, head_dim]
        let split_heads = |x: DynTensor, len: usize| -> Result<DynTensor> {
            x.reshape(&[b, len, heads, head_dim])?.transpose(1, 2)
        };
        // The queries' 1/sqrt(head_dim) is applied to their projection's weight and bias
        // ([E, E] and [E]) rather than to the queries ([B, heads, T, head_dim], a strided
        // view): the same product, a fraction of the work in both passes.
        let scale = (1.0 / head_dim as f64).sqrt();
        let q_bias = bias_of(0).map(|b| b.mul_scalar(scale)).transpose()?;
        let q = query.linear(&w[0].mul_scalar(scale)?, q_bias.as_ref())?;
        Ok(Heads {
            q: split_heads(q, t)?,
            k: split_heads(key.linear(&w[1], bias_of(1))?, s)?,
            v: split_heads(value.linear(&w[2], bias_of(2))?, s)?,
            count: heads,
            batch: b,
            t,
            s,
        })
    }

    /// The heads' outputs `[B, heads, T, Dv]` concatenated and projected: `[B, T, E]`.
    fn merge(&self, attended: &DynTensor, weights: &AttentionWeights) -> Result<DynTensor> {
        let e = weights.in_proj_weight.dims()[1];
        let merged = attended
            .transpose(1, 2)?
            .reshape(&[self.batch, self.t, e])?;
        merged.linear(weights.out_proj_weight, weights.out_proj_bias)
    }
}

/// `MultiheadAttention<EMBED, HEADS>`: PyTorch's `torch.nn.MultiheadAttention(EMBED, HEADS,
/// batch_first=True)`; see [`multi_head_attention`]. Parameters `in_proj_weight` `[3E, E]`,
/// `in_proj_bias` `[3E]`, `out_proj.weight` `[E, E]`, `out_proj.bias` `[E]`.
pub struct MultiheadAttention<const EMBED: usize, const HEADS: usize> {
    /// The query, key and value projections stacked along the rows, `[3E, E]`.
    pub in_proj_weight: DynTensor,
    /// Bias of the stacked projections, `[3E]`; absent without biases.
    pub in_proj_bias: Option<DynTensor>,
    /// Output projection, `[E, E]` weight and `[E]` bias.
    pub out_proj: Linear<EMBED, EMBED>,
    /// Dropout probability on the attention weights (training mode only).
    pub dropout: f64,
    training: TrainingFlag,
}

impl<const EMBED: usize, const HEADS: usize> MultiheadAttention<EMBED, HEADS> {
    /// PyTorch's initialisation: `in_proj_weight` Xavier-uniform, both biases zero,
    /// `out_proj.weight` U(-1/sqrt(E), 1/sqrt(E)); no dropout. An error when `HEADS` does not
    /// divide `EMBED`.
    pub fn new() -> Result<Self> {
        Self::with_options(0.0, true)
    }

    /// With dropout `p` on the attention weights, and with or without the biases (PyTorch's
    /// `dropout` and `bias` arguments).
    pub fn with_options(p: f64, bias: bool) -> Result<Self> {
        check_heads(EMBED, HEADS)?;
        let bound = (6.0 / (4 * EMBED) as f64).sqrt();
        let in_proj_weight =
            DynTensor::uniform(&[3 * EMBED, EMBED], -bound, bound, DType::F32)?.requires_grad_()?;
        let in_proj_bias = if bias {
            Some(DynTensor::zeros(&[3 * EMBED], DType::F32)?.requires_grad_()?)
        } else {
            None
        };
        let mut out_proj = Linear::without_bias()?;
        if bias {
            out_proj.bias = Some(DynTensor::zeros(&[EMBED], DType::F32)?.requires_grad_()?);
        }
        Self::from_parameters(in_proj_weight, in_proj_bias, out_proj, p)
    }

    /// A layer from given parameters (of any float dtype), checked against `EMBED` and
    /// `HEADS`.
    pub fn from_parameters(
        in_proj_weight: DynTensor,
        in_proj_bias: Option<DynTensor>,
        out_proj: Linear<EMBED, EMBED>,
        p: f64,
    ) -> Result<Self> {
        check_heads(EMBED, HEADS)?;
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::InvalidArgument {
                op: "MultiheadAttention",
                message: format!("dropout probability {p} is outside [0, 1]"),
            });
        }
        if in_proj_weight.dims() != [3 * EMBED, EMBED] {
            return Err(invalid(format!(
                "in_proj_weight must be [{}, {EMBED}], got {:?}",
                3 * EMBED,
                in_proj_weight.dims()
            )));
        }
        if let Some(bias) = in_proj_bias.as_ref().filter(|b| b.dims() != [3 * EMBED]) {
            return Err(invalid(format!(
                "in_proj_bias must be [{}], got {:?}",
                3 * EMBED,
                bias.dims()
            )));
        }
        Ok(MultiheadAttention {
            in_proj_weight,
            in_proj_bias,
            out_proj,
            dropout: p,
            training: TrainingFlag::new(),
        })
    }

    /// The parameters as the functional form takes them.
    pub fn weights(&self) -> AttentionWeights<'_> {
        AttentionWeights {
            in_proj_weight: &self.in_proj_weight,
            in_proj_bias: self.in_proj_bias.as_ref(),
            out_proj_weight: &self.out_proj.weight,
            out_proj_bias: self.out_proj.bias.as_ref(),
        }
    }

    fn options<'a>(&self, attn_mask: Option<&'a DynTensor>, causal: bool) -> AttentionOptions<'a> {
        AttentionOptions {
            attn_mask,
            causal,
            dropout: self.dropout,
            training: self.training.get(),
        }
    }

    /// `query` `[B, T, EMBED]`, `key` and `value` `[B, S, EMBED]` -> `[B, T, EMBED]`.
    /// `attn_mask`: `[T, S]` or `[B * HEADS, T, S]`, `bool` with `true` = masked (PyTorch's
    /// convention) or float added to the scores; `causal` also masks keys after the query.
    /// A query the mask lets see no key attends to nothing (its output is `out_proj`'s
    /// bias), as with PyTorch's `need_weights=False`.
    pub fn forward_dyn(
        &self,
        query: &DynTensor,
        key: &DynTensor,
        value: &DynTensor,
        attn_mask: Option<&DynTensor>,
        causal: bool,
    ) -> Result<DynTensor> {
        let options = self.options(attn_mask, causal);
        multi_head_attention_output(query, key, value, HEADS, self.weights(), options)
    }

    /// Like [`forward_dyn`](Self::forward_dyn), also returning the attention weights averaged
    /// over the heads, `[B, T, S]` (PyTorch's `need_weights=True`, `average_attn_weights=True`).
    /// A query the mask lets see no key gets NaN weights and output, as there.
    pub fn forward_with_weights(
        &self,
        query: &DynTensor,
        key: &DynTensor,
        value: &DynTensor,
        attn_mask: Option<&DynTensor>,
        causal: bool,
    ) -> Result<(DynTensor, DynTensor)> {
        let options = self.options(attn_mask, causal);
        let (out, attention) =
            multi_head_attention(query, key, value, HEADS, self.weights(), options)?;
        Ok((out, attention.mean(&[1], false)?))
    }
}

impl<const EMBED: usize, const HEADS: usize> Module for MultiheadAttention<EMBED, HEADS> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        f(&format!("{prefix}in_proj_weight"), &self.in_proj_weight);
        if let Some(bias) = &self.in_proj_bias {
            f(&format!("{prefix}in_proj_bias"), bias);
        }
        self.out_proj.visit(&format!("{prefix}out_proj."), f);
    }

    fn set_training(&self, training: bool) {
        self.training.set(training);
    }

    fn training(&self) -> Option<bool> {
        Some(self.training.get())
    }

    fn describe(&self) -> String {
        format!(
            "MultiheadAttention(embed_dim={EMBED}, num_heads={HEADS}, dropout={}, bias={})",
            self.dropout,
            self.in_proj_bias.is_some()
        )
    }

    fn children(&self) -> Vec<(&'static str, &dyn Module)> {
        vec![("out_proj", &self.out_proj)]
    }
}

/// The activation between the two linear layers of the feed-forward part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FeedForwardActivation {
    /// `max(x, 0)`, PyTorch's default `activation="relu"`.
    #[default]
    Relu,
    /// The exact (erf) GELU, PyTorch's `activation="gelu"`.
    Gelu,
}

/// `TransformerEncoderBlock<D, HEADS, FF>`: PyTorch's `torch.nn.TransformerEncoderLayer(D,
/// HEADS, FF, norm_first=True, batch_first=True)`, the pre-norm block
///
/// `x = x + dropout1(self_attn(norm1(x)))`,
/// `x = x + dropout2(linear2(dropout(activation(linear1(norm2(x))))))`,
///
/// with PyTorch's parameter names (`self_attn.in_proj_weight`, `self_attn.out_proj.weight`,
/// `linear1.weight`, `linear2.weight`, `norm1.weight`, `norm2.weight`, and the biases).
pub struct TransformerEncoderBlock<const D: usize, const HEADS: usize, const FF: usize> {
    /// Self-attention of the first sub-block.
    pub self_attn: MultiheadAttention<D, HEADS>,
    /// First feed-forward layer, `D -> FF`.
    pub linear1: Linear<D, FF>,
    /// After the activation.
    pub dropout: Dropout,
    /// Second feed-forward layer, `FF -> D`.
    pub linear2: Linear<FF, D>,
    /// Layer norm before the attention.
    pub norm1: LayerNorm<D>,
    /// Layer norm before the feed-forward part.
    pub norm2: LayerNorm<D>,
    /// On the attention branch.
    pub dropout1: Dropout,
    /// On the feed-forward branch.
    pub dropout2: Dropout,
    /// Activation between `linear1` and `linear2`.
    pub activation: FeedForwardActivation,
}

impl<const D: usize, const HEADS: usize, const FF: usize> TransformerEncoderBlock<D, HEADS, FF> {
    /// PyTorch's defaults: dropout 0.1, ReLU, LayerNorm eps 1e-5. An error when `HEADS` does
    /// not divide `D`.
    pub fn new() -> Result<Self> {
        Self::with_options(0.1, FeedForwardActivation::Relu)
    }

    /// Dropout probability `p` (attention weights and the three dropout sites) and the
    /// feed-forward activation.
    pub fn with_options(p: f64, activation: FeedForwardActivation) -> Result<Self> {
        Ok(TransformerEncoderBlock {
            self_attn: MultiheadAttention::with_options(p, true)?,
            linear1: Linear::new()?,
            dropout: Dropout::new(p)?,
            linear2: Linear::new()?,
            norm1: LayerNorm::new()?,
            norm2: LayerNorm::new()?,
            dropout1: Dropout::new(p)?,
            dropout2: Dropout::new(p)?,
            activation,
        })
    }

    /// `x` `[B, T, D]` -> `[B, T, D]`; `attn_mask` and `causal` as for
    /// [`MultiheadAttention::forward_dyn`] (PyTorch's `src_mask`).
    pub fn forward_dyn(
        &self,
        x: &DynTensor,
        attn_mask: Option<&DynTensor>,
        causal: bool,
    ) -> Result<DynTensor> {
        if x.rank() != 3 || x.dims()[2] != D {
            return Err(ShapeError::Invalid {
                context: "TransformerEncoderBlock".into(),
                message: format!(
                    "input must be [batch, length, {D}] (batch first), got {:?}",
                    x.dims()
                ),
            }
            .into());
        }
        let h = self.norm1.forward_dyn(x)?;
        let attended = self.self_attn.forward_dyn(&h, &h, &h, attn_mask, causal)?;
        let x = x.add(&self.dropout1.forward_dyn(&attended)?)?;
        let hidden = self.linear1.forward_dyn(&self.norm2.forward_dyn(&x)?)?;
        let activation = match self.activation {
            FeedForwardActivation::Relu => UnaryOp::Relu,
            FeedForwardActivation::Gelu => UnaryOp::Gelu,
        };
        let fed = self
            .linear2
            .forward_dyn(&self.dropout.after_activation(&hidden, activation)?)?;
        x.add(&self.dropout2.forward_dyn(&fed)?)
    }
}

impl<const D: usize, const HEADS: usize, const FF: usize> Module
    for TransformerEncoderBlock<D, HEADS, FF>
{
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        self.self_attn.visit(&format!("{prefix}self_attn."), f);
        self.linear1.visit(&format!("{prefix}linear1."), f);
        self.linear2.visit(&format!("{prefix}linear2."), f);
        self.norm1.visit(&format!("{prefix}norm1."), f);
        self.norm2.visit(&format!("{prefix}norm2."), f);
    }

    fn training(&self) -> Option<bool> {
        self.self_attn.training()
    }

    fn set_training(&self, training: bool) {
        self.self_attn.set_training(training);
        self.dropout.set_training(training);
        self.dropout1.set_training(training);
        self.dropout2.set_training(training);
    }

    fn describe(&self) -> String {
        format!(
            "TransformerEncoderBlock(d_model={D}, nhead={HEADS}, dim_feedforward={FF}, \
             dropout={}, activation={:?}, norm_first=True)",
            self.dropout.p, self.activation
        )
    }

    fn children(&self) -> Vec<(&'static str, &dyn Module)> {
        vec![
            ("self_attn", &self.self_attn),
            ("linear1", &self.linear1),
            ("dropout", &self.dropout),
            ("linear2", &self.linear2),
            ("norm1", &self.norm1),
            ("norm2", &self.norm2),
            ("dropout1", &self.dropout1),
            ("dropout2", &self.dropout2),
        ]
    }
}
