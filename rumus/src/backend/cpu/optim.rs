//! Fused optimizer updates: one pass over parameter, gradient and state instead of a chain of
//! tensor ops with a fresh buffer each.

use rayon::prelude::*;

use super::backend::Cpu;
use super::buffer::CpuBuffer;
use super::parallel::{PARALLEL_GRAIN, worth_splitting};
use super::simd::widest_isa;
use crate::backend::contract::{Dst, Optim, Src};
use crate::element::Float;
use crate::error::Result;

pub use crate::backend::kinds::AdamScalars;

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

impl Optim for Cpu {
    fn adam_step(
        &self,
        [p, m, v]: [Dst<'_, CpuBuffer>; 3],
        g: Src<'_, CpuBuffer>,
        scalars: AdamScalars<f64>,
    ) -> Result<bool> {
        fn run<T: Float>(
            [p, m, v]: [Dst<'_, CpuBuffer>; 3],
            g: &[T],
            scalars: AdamScalars<f64>,
        ) -> bool {
            let range =
                |layout: &crate::shape::Layout| layout.offset()..layout.offset() + layout.numel();
            let (pr, mr, vr) = (range(p.layout), range(m.layout), range(v.layout));
            let (Some(p), Some(m), Some(v)) = (
                T::slice_mut(p.memory),
                T::slice_mut(m.memory),
                T::slice_mut(v.memory),
            ) else {
                return false;
            };
            adam_update(
                &mut p[pr],
                g,
                &mut m[mr],
                &mut v[vr],
                scalars.map(T::from_f64),
            );
            true
        }
        let gr = g.layout.offset()..g.layout.offset() + g.numel();
        Ok(match g.memory {
            CpuBuffer::F32(gs) => run::<f32>([p, m, v], &gs[gr], scalars),
            CpuBuffer::F64(gs) => run::<f64>([p, m, v], &gs[gr], scalars),
            _ => false,
        })
    }

    fn unscale_flagging_non_finite(
        &self,
        g: Src<'_, CpuBuffer>,
        scale: f64,
        flag: Dst<'_, CpuBuffer>,
    ) -> Result<Option<CpuBuffer>> {
        let (CpuBuffer::F32(values), CpuBuffer::I64(flags)) = (g.memory, flag.memory) else {
            return Ok(None);
        };
        let scale = scale as f32;
        let out = super::strided::map(values, g.layout, |x: f32| x * scale);
        // A non-finite element stays non-finite times a scale (even 0: inf * 0 is NaN), so
        // the result alone shows both kinds of overflow.
        if !out.iter().all(|x| x.is_finite()) {
            flags[flag.layout.offset()] = 1;
        }
        Ok(Some(CpuBuffer::F32(out)))
    }
}
