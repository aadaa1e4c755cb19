//! Fused attention on the host, `softmax(scale q k^T + mask) v`, without the `[T, S]` score
//! matrix: each query row walks the keys in blocks with a running maximum and sum (the online
//! softmax of flash attention), so memory stays linear in the sequence length. The forward
//! pass keeps each row's log-sum-exp; the backward pass recomputes the probabilities from it
//! one block at a time, and dropout's draws with them (a hash of the seed and the index).

use std::borrow::Cow;

use rayon::prelude::*;

use super::backend::Cpu;
use super::buffer::CpuBuffer;
use super::parallel::worth_splitting;
use super::reduce::dot;
use super::strided::map;
use crate::backend::contract::{Attention, Forward, Src, Viewed};
use crate::dtype::DType;
use crate::element::Float;
use crate::error::{Error, Result};
use crate::shape::Layout;

/// The row-major elements of `x` as `T` (the operands' dtype, checked by the op).
fn values<T: Float>(x: Src<'_, CpuBuffer>) -> Result<Vec<T>> {
    crate::alloc::ensure_output("to_vec", x.dims(), std::mem::size_of::<T>())?;
    match T::slice(x.memory) {
        Some(data) => Ok(map(data, x.layout, |e| e)),
        None => Err(Error::DType {
            op: "to_vec",
            expected: std::any::type_name::<T>(),
            found: x.dtype(),
        }),
    }
}

/// A `[problems, rows, width]` operand as the kernels read it: each problem's `rows * width`
/// elements in one contiguous run at `starts[n]`. A view whose rows are contiguous within each
/// problem (a key/value cache narrowed to the tokens so far, heads shared by stride-0 axes) is
/// borrowed as it is; any other view is copied once, row-major. Decoding a language model
/// reads its whole cache every token, so the copy grew with the context.
struct Operand<'a, T: Clone> {
    data: Cow<'a, [T]>,
    starts: Vec<usize>,
}

impl<T: Float> Operand<'_, T> {
    fn read<'a>(x: Src<'a, CpuBuffer>, problems: usize, width: usize) -> Result<Operand<'a, T>> {
        let (dims, strides) = (x.dims(), x.layout.strides());
        let rank = dims.len();
        let rows_contiguous = rank >= 2
            && dims[rank - 1] == width
            && (width <= 1 || strides[rank - 1] == 1)
            && (dims[rank - 2] <= 1 || strides[rank - 2] == width);
        if let (true, Some(data)) = (rows_contiguous, T::slice(x.memory)) {
            let leading = &dims[..rank - 2];
            let starts = (0..problems)
                .map(|n| {
                    let (mut rest, mut at) = (n, x.layout.offset());
                    for (&size, &stride) in leading.iter().zip(&strides[..rank - 2]).rev() {
                        at += rest % size * stride;
                        rest /= size;
                    }
                    at
                })
                .collect();
            return Ok(Operand {
                data: Cow::Borrowed(data),
                starts,
            });
        }
        let per_problem = x.numel() / problems.max(1);
        Ok(Operand {
            data: Cow::Owned(values::<T>(x)?),
            starts: (0..problems).map(|n| n * per_problem).collect(),
        })
    }

    /// Problem `n`'s `len` elements.
    fn problem(&self, n: usize, len: usize) -> &[T] {
        &self.data[self.starts[n]..][..len]
    }
}

/// The mask's elements, row-major.
fn mask_values(mask: Option<Src<'_, CpuBuffer>>) -> Result<Option<Vec<bool>>> {
    mask.map(|m| match m.memory {
        CpuBuffer::Bool(data) => Ok(map(data, m.layout, |e| e)),
        other => Err(Error::DType {
            op: "to_vec",
            expected: "bool",
            found: other.dtype(),
        }),
    })
    .transpose()
}

fn forward_typed<T: Float>(
    [q, k, v]: [Src<'_, CpuBuffer>; 3],
    mask: Option<&[bool]>,
    g: &Geometry,
) -> Result<Forward<CpuBuffer>> {
    let (q, k, v) = (
        Operand::read(q, g.batch, g.d)?,
        Operand::read(k, g.batch, g.d)?,
        Operand::read(v, g.batch, g.dv)?,
    );
    let (out, lse) = forward((&q, &k, &v), mask, g);
    let layout = Layout::contiguous(&[g.batch, g.t, g.dv]);
    Ok(((T::into_buffer(out), layout), T::into_buffer(lse)))
}

fn backward_typed<T: Float>(
    operands: [Src<'_, CpuBuffer>; 3],
    mask: Option<&[bool]>,
    [out, lse, grad]: [Src<'_, CpuBuffer>; 3],
    g: &Geometry,
) -> Result<[Viewed<CpuBuffer>; 3]> {
    let [q, k, v] = operands;
    let (q, k, v) = (
        Operand::read(q, g.batch, g.d)?,
        Operand::read(k, g.batch, g.d)?,
        Operand::read(v, g.batch, g.dv)?,
    );
    let (out, lse, grad) = (values::<T>(out)?, values::<T>(lse)?, values::<T>(grad)?);
    let saved = Saved {
        out: &out,
        lse: &lse,
        grad: &grad,
    };
    let (dq, dk, dv) = backward((&q, &k, &v), mask, saved, g);
    let viewed = |values: Vec<T>, like: Src<'_, CpuBuffer>| {
        (T::into_buffer(values), Layout::contiguous(like.dims()))
    };
    Ok([
        viewed(dq, operands[0]),
        viewed(dk, operands[1]),
        viewed(dv, operands[2]),
    ])
}

impl Attention for Cpu {
    fn attention_forward(
        &self,
        operands: [Src<'_, CpuBuffer>; 3],
        mask: Option<Src<'_, CpuBuffer>>,
        g: &Geometry,
        _autocast: Option<DType>,
    ) -> Result<Option<Forward<CpuBuffer>>> {
        let mask = mask_values(mask)?;
        let fused = if operands[0].dtype() == DType::F64 {
            forward_typed::<f64>(operands, mask.as_deref(), g)
        } else {
            forward_typed::<f32>(operands, mask.as_deref(), g)
        };
        fused.map(Some)
    }

    fn attention_backward(
        &self,
        operands: [Src<'_, CpuBuffer>; 3],
        mask: Option<Src<'_, CpuBuffer>>,
        saved: [Src<'_, CpuBuffer>; 3],
        g: &Geometry,
        _autocast: Option<DType>,
    ) -> Result<[Viewed<CpuBuffer>; 3]> {
        let mask = mask_values(mask)?;
        if operands[0].dtype() == DType::F64 {
            backward_typed::<f64>(operands, mask.as_deref(), saved, g)
        } else {
            backward_typed::<f32>(operands, mask.as_deref(), saved, g)
        }
    }
}

/// Keys scored at once: one rescale of the running output per block.
const BLOCK: usize = 64;

pub use crate::backend::kinds::{AttentionDropout, Geometry};

impl Geometry {
    /// Dropout's draws, worked out once per pass: see [`Draws::factor`].
    fn draws<T: Float>(&self) -> Draws<T> {
        Draws {
            dropout: self.dropout.map(|dropout| {
                let threshold = super::dropout::threshold(dropout.p);
                (
                    threshold,
                    dropout.seed,
                    T::from_f64(1.0 / (1.0 - dropout.p)),
                )
            }),
            t: self.t,
            s: self.s,
        }
    }

    /// The keys query `i` may see, before padding: `0..end`.
    fn visible_end(&self, i: usize) -> usize {
        if self.causal {
            (i + 1).min(self.s)
        } else {
            self.s
        }
    }
}

/// Dropout's threshold, seed and kept factor (none without dropout), with the sizes that
/// index the probabilities.
#[derive(Clone, Copy)]
struct Draws<T> {
    dropout: Option<(u32, u64, T)>,
    t: usize,
    s: usize,
}

impl<T: Float> Draws<T> {
    /// Dropout's factor of probability `(n, i, j)`: 0 or `1 / (1 - p)`, 1 without dropout.
    fn factor(&self, n: usize, i: usize, j: usize) -> T {
        let Some((threshold, seed, kept)) = self.dropout else {
            return T::ONE;
        };
        // Indices count in 32 bits, as the dropout op's do.
        let index = ((n * self.t + i) * self.s + j) as u32;
        if super::dropout::kept(index, seed, threshold) {
            kept
        } else {
            T::ZERO
        }
    }
}

/// The three operands of `batch` problems.
type Operands<'o, 'a, T> = (&'o Operand<'a, T>, &'o Operand<'a, T>, &'o Operand<'a, T>);

/// One problem's operands.
struct Problem<'a, T> {
    q: &'a [T],
    k: &'a [T],
    v: &'a [T],
    /// `true` where a key is padding.
    padding: Option<&'a [bool]>,
}

fn problem<'a, T: Float>(
    n: usize,
    g: &Geometry,
    (q, k, v): Operands<'a, '_, T>,
    mask: Option<&'a [bool]>,
) -> Problem<'a, T> {
    let row = n / g.problems_per_mask_row.max(1);
    Problem {
        q: q.problem(n, g.t * g.d),
        k: k.problem(n, g.s * g.d),
        v: v.problem(n, g.s * g.dv),
        padding: mask.map(|m| &m[row * g.s..][..g.s]),
    }
}

impl<T: Float> Problem<'_, T> {
    /// `scale q_i . k_j`, or minus infinity for a padding key.
    fn score(&self, g: &Geometry, i: usize, j: usize) -> T {
        if self.padding.is_some_and(|p| p[j]) {
            return T::NEG_INFINITY;
        }
        dot(&self.q[i * g.d..][..g.d], &self.k[j * g.d..][..g.d]) * T::from_f64(g.scale)
    }
}

/// The attention output `[batch, t, dv]` and each query row's log-sum-exp of its scores
/// `[batch, t]` (minus infinity, with a zero output row, where every key is hidden).
fn forward<T: Float>(
    operands: Operands<'_, '_, T>,
    mask: Option<&[bool]>,
    g: &Geometry,
) -> (Vec<T>, Vec<T>) {
    let draws = g.draws::<T>();
    let mut out = vec![T::ZERO; g.batch * g.t * g.dv];
    let mut lse = vec![T::ZERO; g.batch * g.t];
    let one_row = |(row, (acc, lse)): (usize, (&mut [T], &mut T))| {
        let (n, i) = (row / g.t, row % g.t);
        let p = problem(n, g, operands, mask);
        let mut scores = [T::ZERO; BLOCK];
        let (mut max, mut sum) = (T::NEG_INFINITY, T::ZERO);
        let end = g.visible_end(i);
        for start in (0..end).step_by(BLOCK) {
            let keys = start..(start + BLOCK).min(end);
            let mut block_max = T::NEG_INFINITY;
            for j in keys.clone() {
                scores[j - start] = p.score(g, i, j);
                block_max = block_max.max(scores[j - start]);
            }
            if block_max == T::NEG_INFINITY {
                continue;
            }
            let new_max = max.max(block_max);
            let rescale = (max - new_max).exp();
            sum *= rescale;
            acc.iter_mut().for_each(|a| *a *= rescale);
            for j in keys {
                let weight = (scores[j - start] - new_max).exp();
                sum += weight;
                // Dropout changes the probability in the output, not in the sum.
                let dropped = weight * draws.factor(n, i, j);
                for (a, &v) in acc.iter_mut().zip(&p.v[j * g.dv..][..g.dv]) {
                    *a += dropped * v;
                }
            }
            max = new_max;
        }
        if sum > T::ZERO {
            let inverse = T::ONE / sum;
            acc.iter_mut().for_each(|a| *a *= inverse);
            *lse = max + sum.ln();
        } else {
            *lse = T::NEG_INFINITY;
        }
    };
    // One query row alone (decoding) is a few thousand multiply-adds per head: with one
    // thread, handing the heads to rayon's pool and sleeping until it is done cost more.
    let visits = g.batch * g.t * g.s * (g.d + g.dv);
    if worth_splitting(visits) {
        out.par_chunks_mut(g.dv.max(1))
            .zip(lse.par_iter_mut())
            .enumerate()
            .for_each(one_row);
    } else {
        out.chunks_mut(g.dv.max(1))
            .zip(lse.iter_mut())
            .enumerate()
            .for_each(one_row);
    }
    (out, lse)
}

/// What the backward pass reads besides the operands.
pub struct Saved<'a, T> {
    /// The forward output `[batch, t, dv]`.
    pub out: &'a [T],
    /// Each row's log-sum-exp `[batch, t]`.
    pub lse: &'a [T],
    /// The gradient of the output `[batch, t, dv]`.
    pub grad: &'a [T],
}

/// The gradients of `q`, `k` and `v`, recomputing each probability from the saved
/// log-sum-exp. Problems run in parallel; within one, rows run in order.
fn backward<T: Float>(
    operands: Operands<'_, '_, T>,
    mask: Option<&[bool]>,
    saved: Saved<'_, T>,
    g: &Geometry,
) -> (Vec<T>, Vec<T>, Vec<T>) {
    let mut dq = vec![T::ZERO; g.batch * g.t * g.d];
    let mut dk = vec![T::ZERO; g.batch * g.s * g.d];
    let mut dv = vec![T::ZERO; g.batch * g.s * g.dv];
    let scale = T::from_f64(g.scale);
    let draws = g.draws::<T>();
    dq.par_chunks_mut((g.t * g.d).max(1))
        .zip(dk.par_chunks_mut((g.s * g.d).max(1)))
        .zip(dv.par_chunks_mut((g.s * g.dv).max(1)))
        .enumerate()
        .for_each(|(n, ((dq, dk), dv))| {
            let p = problem(n, g, operands, mask);
            for i in 0..g.t {
                let row = n * g.t + i;
                let lse = saved.lse[row];
                if lse == T::NEG_INFINITY {
                    continue;
                }
                let d_out = &saved.grad[row * g.dv..][..g.dv];
                // sum_j p_ij (dO_i . v_j), the softmax's correction term.
                let correction = dot(d_out, &saved.out[row * g.dv..][..g.dv]);
                let q_i = &p.q[i * g.d..][..g.d];
                for j in 0..g.visible_end(i) {
                    let score = p.score(g, i, j);
                    if score == T::NEG_INFINITY {
                        continue;
                    }
                    let prob = (score - lse).exp();
                    let factor = draws.factor(n, i, j);
                    let v_j = &p.v[j * g.dv..][..g.dv];
                    for (dv, &o) in dv[j * g.dv..][..g.dv].iter_mut().zip(d_out) {
                        *dv += prob * factor * o;
                    }
                    let d_score = prob * (dot(d_out, v_j) * factor - correction) * scale;
                    let k_j = &p.k[j * g.d..][..g.d];
                    for (dq, &k) in dq[i * g.d..][..g.d].iter_mut().zip(k_j) {
                        *dq += d_score * k;
                    }
                    for (dk, &q) in dk[j * g.d..][..g.d].iter_mut().zip(q_i) {
                        *dk += d_score * q;
                    }
                }
            }
        });
    (dq, dk, dv)
}
