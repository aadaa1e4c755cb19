//! Dropout's draws on the CPU: each element's keep-or-drop decision is a hash of the seed and
//! its index, the function `keep_scale` of `shaders/elementwise.wgsl` computes, so a seed
//! drops the same elements on either device. Counter-based draws need no generator state:
//! the rows split across threads, and the backward pass draws the same mask again.

use super::parallel::for_each_row;
use super::simd::widest_isa;
use crate::element::Float;

/// Elements a task of the parallel loop takes.
const CHUNK: usize = 1 << 14;

/// The PCG output permutation of one 32-bit state.
#[inline(always)]
fn pcg(v: u32) -> u32 {
    let state = v.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let word = ((state >> ((state >> 28) + 4)) ^ state).wrapping_mul(277_803_737);
    (word >> 22) ^ word
}

/// The 24-bit draw of element `i` under `seed`, uniform on `0..2^24`.
#[inline(always)]
fn draw(i: u32, seed: u64) -> u32 {
    pcg(pcg(i ^ seed as u32).wrapping_add((seed >> 32) as u32)) >> 8
}

/// `x` with element `i` multiplied by `scale` where its draw is at or above `p` (as the GPU
/// compares it: `draw / 2^24 >= p` in f32) and by zero elsewhere. Indices count in 32 bits,
/// as on the GPU.
pub fn dropout<T: Float>(x: &[T], p: f64, scale: T, seed: u64) -> Vec<T> {
    let threshold = threshold(p);
    let draws = Draws {
        seed,
        threshold,
        scale,
    };
    // Every element is written: reused memory, not fresh pages to fault in (fresh zeroed
    // outputs were half of a transformer step's page faults).
    let mut out = super::pool::reused(x.len(), T::ZERO);
    for_each_row(&mut out, CHUNK, |chunk, dst| {
        let first = chunk * CHUNK;
        dropout_chunk(&x[first..first + dst.len()], dst, first as u32, draws);
    });
    out
}

/// The draws that keep an element at drop probability `p`: those at or above this.
pub fn threshold(p: f64) -> u32 {
    // draw / 2^24 >= p  <=>  draw >= ceil(p 2^24), both sides exact (draws are below 2^24).
    (f64::from(p as f32) * 16_777_216.0).ceil() as u32
}

/// Whether element `i` is kept under `seed` with this [`threshold`] (as [`dropout`] decides).
#[inline(always)]
pub fn kept(i: u32, seed: u64, threshold: u32) -> bool {
    draw(i, seed) >= threshold
}

/// What decides each element: the seed, the draw threshold, and the kept elements' factor.
#[derive(Clone, Copy)]
struct Draws<T> {
    seed: u64,
    threshold: u32,
    scale: T,
}

widest_isa! {
    /// One chunk of [`dropout`], elements `first..` of the whole, with the hash's 32-bit
    /// multiplies and per-lane shifts in vector registers (at the default SSE2 width the
    /// compiler leaves them scalar, and the draws took longer than a mask from a generator).
    fn dropout_chunk<T: Float>(x: &[T], out: &mut [T], first: u32, draws: Draws<T>)
        => dropout_chunk_plain
}

#[inline(always)]
fn dropout_chunk_plain<T: Float>(x: &[T], out: &mut [T], first: u32, draws: Draws<T>) {
    for (j, (d, &v)) in out.iter_mut().zip(x).enumerate() {
        let i = first.wrapping_add(j as u32);
        let keep = if kept(i, draws.seed, draws.threshold) {
            draws.scale
        } else {
            T::ZERO
        };
        *d = v * keep;
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    /// The draws are uniform enough that the kept fraction matches `1 - p` for several seeds,
    /// and kept values are scaled exactly.
    #[test]
    fn drops_at_the_rate_asked_for() {
        let x = vec![1.0f32; 200_000];
        for seed in [0u64, 1, 0xDEAD_BEEF_0000_0001] {
            let out = dropout(&x, 0.3, 2.0, seed);
            let dropped = out.iter().filter(|&&v| v == 0.0).count() as f64 / x.len() as f64;
            // binomial standard error 0.001 at n = 2e5
            assert!(
                (dropped - 0.3).abs() < 0.006,
                "seed {seed}: dropped {dropped}"
            );
            assert!(out.iter().all(|&v| v == 0.0 || v == 2.0));
        }
    }
}
