//! Scaled dot-product attention as one op (PyTorch's `F.scaled_dot_product_attention`):
//! `softmax(scale q k^T + masks) v` over the last two axes. On the host it runs fused
//! (`backend::cpu::attention`): no `[T, S]` matrix is made, forward or backward, so memory
//! grows linearly with the sequence; the record keeps the inputs, the output and one
//! log-sum-exp per query row. On a GPU the same algorithm runs in `shaders/attention.wgsl`
//! (f32, rows up to 128 wide; wider ones take the composite form, products and a softmax
//! with the `[T, S]` scores in memory). Under [`autocast`](crate::amp::autocast), on a GPU
//! with cooperative matrices and rows 64 wide, it runs on the matrix units
//! (`shaders/attention_coop.wgsl`): queries, keys, values, the output's gradient, and the
//! probabilities and score gradients before their second product are rounded to `f16`, while
//! scores, the softmax and every sum stay `f32`, as in PyTorch's `f16` flash attention.
//! Elsewhere autocast leaves the fused attention in `f32`. Dropout of the probabilities
//! (`dropout_p`) runs inside every form: each draw is a hash of a seed and the probability's
//! index, so the backward pass draws the mask again and nothing `[T, S]` is kept for it.
//!
//! ```
//! use rumus::DynTensor;
//! use rumus::ops::attention::SdpaOptions;
//!
//! # fn main() -> rumus::Result<()> {
//! // batch 2, 4 heads, 16 queries and keys of width 8
//! let q = DynTensor::randn(&[2, 4, 16, 8], rumus::DType::F32)?.requires_grad_()?;
//! let out = q.scaled_dot_product_attention(&q, &q, SdpaOptions { causal: true, ..Default::default() })?;
//! assert_eq!(out.dims(), [2, 4, 16, 8]);
//! let grads = out.sum_all()?.backward()?;
//! assert_eq!(grads.grad(&q)?.dims(), [2, 4, 16, 8]);
//! # Ok(())
//! # }
//! ```

use super::BackwardOp;
use super::mask::causal_mask;
use crate::autograd::{Saved, is_grad_enabled, record};
use crate::backend::kinds::{AttentionDropout, Geometry};
use crate::dtype::DType;
use crate::error::{Error, Result, ShapeError};
use crate::shape::Layout;
use crate::storage::Storage;
use crate::tensor::DynTensor;

/// Masks and scale of [`DynTensor::scaled_dot_product_attention`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SdpaOptions<'a> {
    /// `bool` `[B, S]` (`[S]` for rank-2 operands), `true` where a key is padding; `B` is the
    /// first axis of the operands, shared by the axes between it and the last two (heads).
    pub key_padding_mask: Option<&'a DynTensor>,
    /// Query `i` sees keys `0..=i` only (top-left aligned when `T != S`, as PyTorch's
    /// `is_causal`).
    pub causal: bool,
    /// The factor of `q k^T`; `1 / sqrt(D)` when `None`.
    pub scale: Option<f64>,
    /// Dropout of the probabilities, in `[0, 1)` (PyTorch's `dropout_p`: applied whenever it
    /// is above 0, so pass 0 outside training). The draws take one seed from the global
    /// generator and are a hash of it and each probability's index in `[.., T, S]`, the
    /// draws `nn::functional::dropout` of the probabilities would make; the fused kernels
    /// draw them again in the backward pass instead of keeping a mask.
    pub dropout_p: f64,
}

/// What the backward pass of a fused attention needs.
pub struct AttentionRecord {
    q: Saved,
    k: Saved,
    v: Saved,
    /// The output and each query row's log-sum-exp, untracked.
    out: DynTensor,
    lse: DynTensor,
    mask: Option<DynTensor>,
    geometry: Geometry,
    /// The dtype the forward pass ran in under autocast, if it did (the backward pass then
    /// runs the same kernels, whatever scope it is called in).
    autocast: Option<DType>,
}

impl AttentionRecord {
    pub(crate) fn take_saved(self) -> impl Iterator<Item = DynTensor> {
        [self.q, self.k, self.v].into_iter().map(Saved::into_tensor)
    }
}

fn shape_error(message: String) -> Error {
    ShapeError::Invalid {
        context: "scaled_dot_product_attention".into(),
        message,
    }
    .into()
}

/// The sizes of the problem, checked.
fn geometry(
    q: &DynTensor,
    k: &DynTensor,
    v: &DynTensor,
    options: &SdpaOptions,
) -> Result<Geometry> {
    let rank = q.rank();
    if rank < 2 || k.rank() != rank || v.rank() != rank {
        return Err(shape_error(format!(
            "query, key and value need the same rank, at least 2 ([.., T, D], [.., S, D], \
             [.., S, Dv]), got {:?}, {:?} and {:?}",
            q.dims(),
            k.dims(),
            v.dims()
        )));
    }
    let lead = &q.dims()[..rank - 2];
    let (t, d) = (q.dims()[rank - 2], q.dims()[rank - 1]);
    let (s, dk) = (k.dims()[rank - 2], k.dims()[rank - 1]);
    let (sv, dv) = (v.dims()[rank - 2], v.dims()[rank - 1]);
    if &k.dims()[..rank - 2] != lead || &v.dims()[..rank - 2] != lead || dk != d || sv != s {
        return Err(shape_error(format!(
            "query {:?}, key {:?} and value {:?} must share their leading dims, query and key \
             their width, key and value their length",
            q.dims(),
            k.dims(),
            v.dims()
        )));
    }
    for t in [k, v] {
        if t.dtype() != q.dtype() {
            return Err(Error::DTypeMismatch {
                op: "scaled_dot_product_attention",
                lhs: q.dtype(),
                rhs: t.dtype(),
            });
        }
    }
    if !matches!(q.dtype(), DType::F32 | DType::F64) {
        return Err(Error::DType {
            op: "scaled_dot_product_attention",
            expected: "f32 or f64",
            found: q.dtype(),
        });
    }
    if !(0.0..1.0).contains(&options.dropout_p) {
        return Err(Error::InvalidArgument {
            op: "scaled_dot_product_attention",
            message: format!(
                "dropout_p {} is outside [0, 1) (0 turns dropout off)",
                options.dropout_p
            ),
        });
    }
    let batch: usize = lead.iter().product();
    let mut problems_per_mask_row = batch;
    if let Some(mask) = options.key_padding_mask {
        let expected: Vec<usize> = lead.iter().take(1).copied().chain([s]).collect();
        if mask.dims() != expected || mask.dtype() != DType::Bool {
            return Err(shape_error(format!(
                "key_padding_mask must be bool {expected:?} (true where a key is padding), got \
                 {} {:?}",
                mask.dtype(),
                mask.dims()
            )));
        }
        problems_per_mask_row = batch / lead.first().copied().unwrap_or(1).max(1);
    }
    Ok(Geometry {
        batch,
        t,
        s,
        d,
        dv,
        problems_per_mask_row,
        causal: options.causal,
        scale: options.scale.unwrap_or(1.0 / (d.max(1) as f64).sqrt()),
        // The seed is drawn once the rest is known to be valid.
        dropout: None,
    })
}

impl DynTensor {
    /// `softmax(scale self key^T + masks) value` over the last two axes: `self` `[.., T, D]`,
    /// `key` `[.., S, D]`, `value` `[.., S, Dv]`, the result `[.., T, Dv]`. A query row that
    /// sees no key at all (every key padding) gives zeros and no gradient, as PyTorch's
    /// `scaled_dot_product_attention` does (since 2.5), in every form (the fused kernels,
    /// the composite form with the scores in memory, the recorded backward pass). On a GPU's
    /// matrix units (autocast) the result and the
    /// gradients keep their operands' memory layout: for heads split from a `[B, T, H, D]`
    /// projection as a `[B, H, T, D]` view, they are such views too, and merging the heads
    /// back (`transpose(1, 2)`, `reshape`) copies nothing.
    pub fn scaled_dot_product_attention(
        &self,
        key: &DynTensor,
        value: &DynTensor,
        options: SdpaOptions,
    ) -> Result<DynTensor> {
        let mut g = geometry(self, key, value, &options)?;
        if options.dropout_p > 0.0 {
            g.dropout = Some(AttentionDropout {
                p: options.dropout_p,
                seed: crate::rng::with_global(|generator| generator.next_u64()),
            });
        }
        let mask = options.key_padding_mask;
        let operands = [self, key, value];
        // The matrix units round the dropped-out probabilities, scaled by 1 / (1 - p), to
        // f16: past p = 0.999 (a factor of 1,000) the f32 kernels take them (bf16 has f32's
        // range).
        let autocast = super::hooks::autocast_dtype().filter(|&dtype| {
            dtype == DType::BF16
                || g.dropout
                    .is_none_or(|dropout| dropout.p <= MAX_HALF_DROPOUT)
        });
        let mask_here = on_device_of(self, mask)?;
        let fused = Storage::attention_forward(
            operands.map(DynTensor::operand),
            mask_here.as_ref().map(DynTensor::operand),
            &g,
            autocast,
        )?;
        let Some((out, lse)) = fused else {
            return composite(self, key, value, mask, &g);
        };
        let (out, lse) = (viewed(out), DynTensor::computed(lse, &[g.batch, g.t]));
        let out_dims: Vec<usize> = self.dims()[..self.rank() - 1]
            .iter()
            .copied()
            .chain([g.dv])
            .collect();
        let out = out.reshape(&out_dims)?;
        Ok(record(out.clone(), &[self, key, value], || {
            BackwardOp::Attention(Box::new(AttentionRecord {
                q: Saved::new(self),
                k: Saved::new(key),
                v: Saved::new(value),
                out,
                lse,
                mask: mask.cloned(),
                geometry: g,
                autocast,
            }))
        }))
    }
}

/// A kernel's result in the view the kernel gave it.
fn viewed((storage, layout): (triomphe::Arc<Storage>, Layout)) -> DynTensor {
    DynTensor::computed(storage, &[layout.numel()]).view_with(layout)
}

/// The key padding mask on the device of `q` (the kernels read it there).
fn on_device_of(q: &DynTensor, mask: Option<&DynTensor>) -> Result<Option<DynTensor>> {
    mask.map(|m| m.to(&q.device())).transpose()
}

/// The largest dropout probability the `f16` kernels take (f16 holds factors up to 65,504).
pub(crate) const MAX_HALF_DROPOUT: f64 = 0.999;

/// Whether an attention with rows `width` wide on `device` would run on the GPU's matrix
/// units now (under autocast, `attention_coop.wgsl`).
pub(crate) fn on_matrix_units(device: &crate::Device, width: usize) -> bool {
    let autocast = super::hooks::autocast_dtype();
    Storage::attention_on_matrix_units(device, width, autocast)
}

/// The attention from products and a softmax (the `[.., T, S]` scores in memory), for GPU
/// rows wider than the kernels keep.
fn composite(
    q: &DynTensor,
    k: &DynTensor,
    v: &DynTensor,
    mask: Option<&DynTensor>,
    g: &Geometry,
) -> Result<DynTensor> {
    dropped_out(&probabilities(q, k, mask, g)?, g)?.matmul(v)
}

/// Dropout of the probabilities `[.., T, S]` as the fused kernels draw it (or `p` itself
/// without dropout). Being linear, it also maps the gradient of the dropped-out
/// probabilities to theirs.
fn dropped_out(p: &DynTensor, g: &Geometry) -> Result<DynTensor> {
    match g.dropout {
        Some(dropout) => crate::ops::dropout::seeded_dropout(p, dropout.p, dropout.seed),
        None => Ok(p.clone()),
    }
}

/// `softmax(scale q k^T + masks)`, `[.., T, S]`, with zeros in a row whose every score is
/// `-inf` (a query that sees no key), as the fused kernels give (see
/// `softmax_zeroing_unseen_rows`).
fn probabilities(
    q: &DynTensor,
    k: &DynTensor,
    mask: Option<&DynTensor>,
    g: &Geometry,
) -> Result<DynTensor> {
    let rank = q.rank();
    let mut scores = q.matmul(&k.transpose(-1, -2)?)?.mul_scalar(g.scale)?;
    if let Some(mask) = mask {
        // [B, S] -> [B, 1.., 1, S] against [B, H.., T, S].
        let mut dims = vec![1; rank];
        dims[rank - 1] = g.s;
        if rank > 2 {
            dims[0] = mask.dims()[0];
        }
        let mask = mask.reshape(&dims)?.to(&scores.device())?;
        scores = scores.masked_fill(&mask, f64::NEG_INFINITY)?;
    }
    if g.causal {
        let hidden = causal_mask(g.t, g.s)?.to(&scores.device())?;
        scores = scores.masked_fill(&hidden, f64::NEG_INFINITY)?;
    }
    crate::ops::softmax::softmax_zeroing_unseen_rows(&scores)
}

/// The gradients of query, key and value (those `needs` asks for).
pub(crate) fn attention_backward(
    record: &AttentionRecord,
    grad: &DynTensor,
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let name = "scaled_dot_product_attention";
    let operands = [
        record.q.get(name)?,
        record.k.get(name)?,
        record.v.get(name)?,
    ];
    let (g, mask) = (&record.geometry, record.mask.as_ref());
    let grads = if is_grad_enabled() {
        recorded_backward(operands, mask, grad, g)?
    } else {
        let mask = on_device_of(operands[0], mask)?;
        let saved = [&record.out, &record.lse, grad].map(DynTensor::operand);
        Storage::attention_backward(
            operands.map(DynTensor::operand),
            mask.as_ref().map(DynTensor::operand),
            saved,
            g,
            record.autocast,
        )?
        .map(viewed)
    };
    Ok(grads
        .into_iter()
        .zip(needs)
        .map(|(g, &need)| need.then_some(g))
        .collect())
}

/// The same gradients from differentiable ops, for a recorded backward pass
/// (`create_graph`): `dS = P (dP - rowsum(dO o O))` with `dP = dO v^T` (with dropout `Z`:
/// `O = (P o Z) v`, `dV = (P o Z)^T dO`, `dP = Z o dO v^T`).
fn recorded_backward(
    [q, k, v]: [&DynTensor; 3],
    mask: Option<&DynTensor>,
    grad: &DynTensor,
    g: &Geometry,
) -> Result<[DynTensor; 3]> {
    let p = probabilities(q, k, mask, g)?;
    let kept = dropped_out(&p, g)?;
    let out = kept.matmul(v)?;
    let dv = kept.transpose(-1, -2)?.matmul(grad)?;
    let dp = dropped_out(&grad.matmul(&v.transpose(-1, -2)?)?, g)?;
    let correction = grad.mul(&out)?.sum(&[-1], true)?;
    let ds = p.mul(&dp.sub(&correction)?)?.mul_scalar(g.scale)?;
    let dq = ds.matmul(k)?;
    let dk = ds.transpose(-1, -2)?.matmul(q)?;
    Ok([dq, dk, dv])
}
