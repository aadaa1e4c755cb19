//! Integer products for quantized inference: `out[i, j] = sum_t a[i, t] * b[j, t]` of int8
//! activation rows `a` `[m, k]` and int8 weight rows `b` `[n, k]` into exact i32 sums.
//!
//! The weights are repacked once ([`PackedI8`]) into blocks of eight outputs, each pair of
//! summed positions holding the eight outputs' two values side by side (16 bytes). The AVX2
//! kernel broadcasts one pair of activations to every lane, widens a block's 16 bytes to
//! i16 and multiply-adds (`vpmaddwd`): eight outputs advance two steps of the sum in one
//! instruction, exactly (a pair sum `2 * 128 * 128` fits i32), with no horizontal sums.
//! Four blocks run side by side so each broadcast serves 32 outputs. Without AVX2 a plain
//! loop computes the same sums; integer sums do not depend on the order, so both paths and
//! any thread count give bit-identical results.

use rayon::prelude::*;

use super::backend::Cpu;
use super::parallel::{threads, worth_splitting};
use crate::backend::contract::Int8;
use crate::backend::kinds::Int8Matrix;
use crate::error::Result;

/// Outputs per block.
const BLOCK: usize = 8;
/// Blocks the kernel computes side by side.
const GROUP: usize = 4;

/// Weights `[n, k]` in the kernel's layout: `[n / 8][k / 2][8][2]`, `n` padded to a multiple
/// of 8 and `k` to a multiple of 2 with zeros (which add nothing to any sum).
#[derive(Debug, Clone)]
pub(crate) struct PackedI8 {
    n: usize,
    k: usize,
    blocks: Vec<i8>,
}

impl PackedI8 {
    /// Repacks row-major `rows` `[n, k]`.
    pub fn new(rows: &[i8], n: usize, k: usize) -> PackedI8 {
        debug_assert_eq!(rows.len(), n * k);
        let pairs = k.div_ceil(2);
        let mut blocks = vec![0i8; n.div_ceil(BLOCK) * pairs * 2 * BLOCK];
        for (j, row) in rows.chunks(k.max(1)).enumerate().take(n) {
            let (block, lane) = (j / BLOCK, j % BLOCK);
            for (t, &v) in row.iter().enumerate() {
                blocks[((block * pairs + t / 2) * BLOCK + lane) * 2 + t % 2] = v;
            }
        }
        PackedI8 { n, k, blocks }
    }

    /// Weight `[j, t]`.
    pub fn get(&self, j: usize, t: usize) -> i8 {
        let pairs = self.k.div_ceil(2);
        self.blocks[(((j / BLOCK) * pairs + t / 2) * BLOCK + j % BLOCK) * 2 + t % 2]
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.blocks.len()
    }

    /// `a` `[m, k]` times the weights transposed: `[m, n]` exact sums, split across threads
    /// when `split` and the product is large enough.
    pub fn product(&self, a: &[i8], m: usize, split: bool) -> Vec<i32> {
        let (n, k) = (self.n, self.k);
        debug_assert_eq!(a.len(), m * k);
        let mut out = vec![0i32; m * n];
        if m == 0 || n == 0 {
            return out;
        }
        let row = |i: usize, out_row: &mut [i32], first_block: usize| {
            self.row(&a[i * k..(i + 1) * k], first_block, out_row)
        };
        let split = split && worth_splitting(m * n * k);
        if !split {
            for (i, out_row) in out.chunks_mut(n).enumerate() {
                row(i, out_row, 0);
            }
        } else if m >= 2 * threads() {
            out.par_chunks_mut(n)
                .enumerate()
                .for_each(|(i, out_row)| row(i, out_row, 0));
        } else {
            // Few rows (a batch of one): split each row's outputs by groups of blocks.
            for (i, out_row) in out.chunks_mut(n).enumerate() {
                out_row
                    .par_chunks_mut(BLOCK * GROUP)
                    .enumerate()
                    .for_each(|(g, chunk)| row(i, chunk, g * GROUP));
            }
        }
        out
    }

    /// `out[c]` = the sum for output `first_block * 8 + c`, for the outputs `out` holds.
    fn row(&self, a: &[i8], first_block: usize, out: &mut [i32]) {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is present (checked above); the kernel's reads stay inside `a`
            // and the blocks, which its asserts check.
            unsafe { avx2::row(self, a, first_block, out) };
            return;
        }
        self.plain_row(a, first_block, out);
    }

    fn plain_row(&self, a: &[i8], first_block: usize, out: &mut [i32]) {
        for (c, o) in out.iter_mut().enumerate() {
            let j = first_block * BLOCK + c;
            *o = (0..self.k)
                .map(|t| i32::from(a[t]) * i32::from(self.get(j, t)))
                .sum();
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{BLOCK, GROUP, PackedI8};

    /// The activation pairs `(a[2p], a[2p + 1])` as i16 halves of one i32 each, ready to be
    /// broadcast (an odd `k` pairs its last value with 0).
    fn pairs(a: &[i8]) -> Vec<i32> {
        a.chunks(2)
            .map(|p| {
                let lo = i32::from(p[0] as i16 as u16);
                let hi = i32::from(p.get(1).map_or(0, |&v| v as i16 as u16));
                lo | hi << 16
            })
            .collect()
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn row(w: &PackedI8, a: &[i8], first_block: usize, out: &mut [i32]) {
        let pairs_of_a = pairs(&a[..w.k]);
        let npairs = pairs_of_a.len();
        let blocks = out.len().div_ceil(BLOCK);
        assert!((first_block + blocks) * npairs * 2 * BLOCK <= w.blocks.len());
        let base = w.blocks.as_ptr();
        let block_ptr = |b: usize| {
            // SAFETY: inside the blocks (the assert above).
            unsafe { base.add((first_block + b) * npairs * 2 * BLOCK) }
        };
        let mut lanes = [0i32; BLOCK * GROUP];
        let mut b = 0;
        while b < blocks {
            let group = (blocks - b).min(GROUP);
            // Loops rather than `array::map` and `zip`, which are not `#[inline]`: calls per
            // group of blocks where codegen units are not inlined into each other (20% of a
            // small convolution's time).
            let mut ptrs = [base; GROUP];
            for (g, ptr) in ptrs.iter_mut().enumerate() {
                *ptr = block_ptr(b + g.min(group - 1));
            }
            let mut acc = [_mm256_setzero_si256(); GROUP];
            for (p, &pair) in pairs_of_a.iter().enumerate() {
                let x = _mm256_set1_epi32(pair);
                for g in 0..GROUP {
                    // SAFETY: 16 bytes of pair `p` of a block inside the buffer.
                    let v = unsafe { _mm_loadu_si128(ptrs[g].add(p * 2 * BLOCK).cast()) };
                    acc[g] =
                        _mm256_add_epi32(acc[g], _mm256_madd_epi16(x, _mm256_cvtepi8_epi16(v)));
                }
            }
            for (g, sums) in acc.iter().enumerate().take(group) {
                // SAFETY: 8 i32 into lanes `g * BLOCK..(g + 1) * BLOCK` of `GROUP * BLOCK`.
                unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().add(g * BLOCK).cast(), *sums) };
            }
            let start = b * BLOCK;
            let len = (out.len() - start).min(group * BLOCK);
            out[start..start + len].copy_from_slice(&lanes[..len]);
            b += group;
        }
    }
}

/// The host keeps no copy of a layer's weights: quantized layers run their host inputs on
/// their own packed weights (`PackedI8`); this backend's `int8_linear` refuses.
impl Int8 for Cpu {
    type Int8Weights = ();

    fn upload_int8(&self, _: &Int8Matrix<'_>) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u64) -> Vec<i8> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 256) as u8 as i8
            })
            .collect()
    }

    /// Sums in i64 from the definition.
    fn reference(a: &[i8], b: &[i8], m: usize, n: usize, k: usize) -> Vec<i32> {
        let mut out = Vec::with_capacity(m * n);
        for i in 0..m {
            for j in 0..n {
                let s: i64 = (0..k)
                    .map(|t| i64::from(a[i * k + t]) * i64::from(b[j * k + t]))
                    .sum();
                out.push(i32::try_from(s).unwrap());
            }
        }
        out
    }

    /// Odd sizes (a partial block, a partial group of blocks, an odd sum length), a batch
    /// of one (split by outputs), products large enough to be split across threads, and
    /// the extreme values -128 and 127.
    #[test]
    fn products_are_the_exact_sums() {
        let cases = [
            (1, 1, 1, 1),
            (3, 5, 17, 2),
            (1, 300, 200, 3),
            (70, 67, 33, 4),
            (2, 9, 1000, 5),
            (1, 40, 9, 6),
        ];
        for (m, n, k, seed) in cases {
            let (a, b) = (values(m * k, seed), values(n * k, seed + 100));
            let packed = PackedI8::new(&b, n, k);
            let expected = reference(&a, &b, m, n, k);
            assert_eq!(packed.product(&a, m, true), expected, "{m}x{n}x{k}");
            assert_eq!(packed.product(&a, m, false), expected, "{m}x{n}x{k} serial");
            let mut plain = vec![0; n];
            packed.plain_row(&a[..k], 0, &mut plain);
            assert_eq!(plain, expected[..n]);
            assert!((0..n).all(|j| (0..k).all(|t| packed.get(j, t) == b[j * k + t])));
        }
        let (lo, hi) = (vec![-128i8; 64], vec![127i8; 64]);
        assert_eq!(
            PackedI8::new(&lo, 1, 64).product(&lo, 1, true),
            [64 * 128 * 128]
        );
        assert_eq!(
            PackedI8::new(&hi, 1, 64).product(&lo, 1, true),
            [-64 * 128 * 127]
        );
    }
}
