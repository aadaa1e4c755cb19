//! Fused optimizer updates: one pass over parameter, gradient and state instead of a chain of
//! tensor ops with a fresh buffer each.

use rayon::prelude::*;

use super::parallel::{PARALLEL_GRAIN, worth_splitting};
use super::simd::widest_isa;
use crate::element::Float;

/// Scalars of one Adam step, already bias-corrected.
#[derive(Clone, Copy)]
pub struct AdamScalars<T> {
    /// `lr / (1 - beta1^t)`.
    pub step_size: T,
    /// Decay rate of the first-moment (mean) estimate.
    pub beta1: T,
    /// Decay rate of the second-moment (uncentred variance) estimate.
    pub beta2: T,
    /// Term added to the denominator for numerical stability.
    pub eps: T,
    /// `1 / sqrt(1 - beta2^t)`.
    pub inv_sqrt_correction2: T,
    /// L2 penalty added to the gradient (Adam's `weight_decay`).
    pub l2: T,
    /// Factor applied to the parameter first (AdamW's `1 - lr * weight_decay`).
    pub decay: T,
}

widest_isa! {
    /// One chunk of the update, through the widest vector instructions this CPU runs: the
    /// default x86-64 target compiles the loop at SSE width, where the square root and the
    /// division of every element dominated (an Adam step was 16% of an MLP training step at
    /// batch 64, perf). The arithmetic is the same on every path (no fused multiply-adds are
    /// formed), so results do not depend on the CPU.
    fn adam_chunk<T: Float>(p: &mut [T], g: &[T], m: &mut [T], v: &mut [T], s: AdamScalars<T>)
        => adam_chunk_plain
}

#[inline(always)]
fn adam_chunk_plain<T: Float>(p: &mut [T], g: &[T], m: &mut [T], v: &mut [T], s: AdamScalars<T>) {
    let (one_b1, one_b2) = (T::ONE - s.beta1, T::ONE - s.beta2);
    for (((p, &g), m), v) in p.iter_mut().zip(g).zip(m.iter_mut()).zip(v.iter_mut()) {
        let g = g + s.l2 * *p;
        *m = s.beta1 * *m + one_b1 * g;
        *v = s.beta2 * *v + one_b2 * g * g;
        *p = *p * s.decay - s.step_size * *m / (v.sqrt() * s.inv_sqrt_correction2 + s.eps);
    }
}

/// Adam/AdamW update of `p` in place from gradient `g`, moments `m` and `v` (all the same
/// length), following PyTorch's formula.
pub fn adam_update<T: Float>(p: &mut [T], g: &[T], m: &mut [T], v: &mut [T], s: AdamScalars<T>) {
    if !worth_splitting(p.len()) {
        return adam_chunk(p, g, m, v, s);
    }
    let chunk = PARALLEL_GRAIN;
    p.par_chunks_mut(chunk)
        .zip(g.par_chunks(chunk))
        .zip(m.par_chunks_mut(chunk))
        .zip(v.par_chunks_mut(chunk))
        .for_each(|(((p, g), m), v)| adam_chunk(p, g, m, v, s));
}
