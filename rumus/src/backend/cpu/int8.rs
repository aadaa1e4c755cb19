//! Integer products for quantized inference: `out[i, j] = sum_t a[i, t] * b[j, t]` of int8
//! rows into exact i32 sums. Both operands are row-major with the summed axis innermost
//! (activations `[M, K]`, weights `[N, K]`, as a linear layer stores them), so every dot
//! product reads two contiguous rows.
//!
//! With AVX2 each step widens 16 int8 values to i16 and multiply-adds pairs into i32 lanes
//! (`vpmaddwd`: 16 products an instruction, exact, since `2 * 127 * 128` fits an i16 pair
//! sum in i32), four weight rows at a time so each activation load serves four outputs.
//! Without AVX2 a plain loop computes the same sums; integer sums do not depend on the
//! order, so both paths, and any thread count, give bit-identical results.

use rayon::prelude::*;

use super::parallel::worth_splitting;

/// Output columns one task computes when the rows are too few to split.
const COLUMN_BLOCK: usize = 64;

/// `a` `[m, k]` times `b` `[n, k]` transposed: `[m, n]` exact i32 sums.
pub(crate) fn matmul_i8_nt(a: &[i8], b: &[i8], m: usize, n: usize, k: usize) -> Vec<i32> {
    debug_assert_eq!(a.len(), m * k);
    debug_assert_eq!(b.len(), n * k);
    let mut out = vec![0i32; m * n];
    if m == 0 || n == 0 {
        return out;
    }
    let row = |i: usize, out_row: &mut [i32], first_col: usize| {
        dots(&a[i * k..(i + 1) * k], &b[first_col * k..], k, out_row);
    };
    if !worth_splitting(m * n * k) {
        for (i, out_row) in out.chunks_mut(n).enumerate() {
            row(i, out_row, 0);
        }
    } else if m >= 2 * super::parallel::threads() {
        out.par_chunks_mut(n)
            .enumerate()
            .for_each(|(i, out_row)| row(i, out_row, 0));
    } else {
        // Few rows (a batch of one): split each row's columns instead.
        for (i, out_row) in out.chunks_mut(n).enumerate() {
            out_row
                .par_chunks_mut(COLUMN_BLOCK)
                .enumerate()
                .for_each(|(c, block)| row(i, block, c * COLUMN_BLOCK));
        }
    }
    out
}

/// `out[j] = a . b[j]` for the `out.len()` rows of `b` (each `k` long) it starts with.
fn dots(a: &[i8], b: &[i8], k: usize, out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") {
        // SAFETY: AVX2 is present (checked above); the kernel reads `a[..k]` and
        // `b[..out.len() * k]`, which the asserts at its start check.
        unsafe { avx2::dots(a, b, k, out) };
        return;
    }
    plain_dots(a, b, k, out);
}

fn plain_dots(a: &[i8], b: &[i8], k: usize, out: &mut [i32]) {
    for (j, o) in out.iter_mut().enumerate() {
        *o = dot_plain(a, &b[j * k..(j + 1) * k]);
    }
}

fn dot_plain(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum()
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::dot_plain;

    /// 16 int8 values at `p`, sign-extended to i16 lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    unsafe fn widen(p: *const i8) -> __m256i {
        // SAFETY: the caller reads 16 bytes inside its slices.
        unsafe { _mm256_cvtepi8_epi16(_mm_loadu_si128(p.cast())) }
    }

    /// The sum of the eight i32 lanes.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn sum_lanes(v: __m256i) -> i32 {
        let half = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
        let pairs = _mm_add_epi32(half, _mm_unpackhi_epi64(half, half));
        let one = _mm_add_epi32(pairs, _mm_shuffle_epi32::<0b01>(pairs));
        _mm_cvtsi128_si32(one)
    }

    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn dots(a: &[i8], b: &[i8], k: usize, out: &mut [i32]) {
        assert!(a.len() >= k && b.len() >= out.len() * k);
        let steps = k / 16;
        let tail = steps * 16;
        let mut j = 0;
        while j + 4 <= out.len() {
            let rows = [0, 1, 2, 3].map(|r| b[(j + r) * k..].as_ptr());
            let mut sums = [_mm256_setzero_si256(); 4];
            for s in 0..steps {
                // SAFETY: `s * 16 + 16 <= k`, inside `a` and each of the four rows.
                unsafe {
                    let x = widen(a.as_ptr().add(s * 16));
                    for r in 0..4 {
                        let w = widen(rows[r].add(s * 16));
                        sums[r] = _mm256_add_epi32(sums[r], _mm256_madd_epi16(x, w));
                    }
                }
            }
            for r in 0..4 {
                let row = &b[(j + r) * k..(j + r + 1) * k];
                out[j + r] = sum_lanes(sums[r]) + dot_plain(&a[tail..k], &row[tail..]);
            }
            j += 4;
        }
        for (jj, o) in out.iter_mut().enumerate().skip(j) {
            let row = &b[jj * k..(jj + 1) * k];
            let mut sum = _mm256_setzero_si256();
            for s in 0..steps {
                // SAFETY: `s * 16 + 16 <= k`, inside `a` and the row.
                unsafe {
                    let x = widen(a.as_ptr().add(s * 16));
                    let w = widen(row.as_ptr().add(s * 16));
                    sum = _mm256_add_epi32(sum, _mm256_madd_epi16(x, w));
                }
            }
            *o = sum_lanes(sum) + dot_plain(&a[tail..k], &row[tail..]);
        }
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

    /// Odd sizes (tails of the 16-wide steps and of the four-row groups), a batch of one
    /// (split by columns), large enough products to be split across threads, and the
    /// extreme values -128 and 127 everywhere.
    #[test]
    fn products_are_the_exact_sums() {
        for (m, n, k, seed) in [
            (1, 1, 1, 1),
            (3, 5, 17, 2),
            (1, 300, 200, 3),
            (70, 67, 33, 4),
            (2, 9, 1000, 5),
        ] {
            let (a, b) = (values(m * k, seed), values(n * k, seed + 100));
            assert_eq!(
                matmul_i8_nt(&a, &b, m, n, k),
                reference(&a, &b, m, n, k),
                "{m}x{n}x{k}"
            );
            let mut plain = vec![0; n];
            plain_dots(&a[..k], &b, k, &mut plain);
            assert_eq!(plain, reference(&a[..k], &b, 1, n, k));
        }
        let (lo, hi) = (vec![-128i8; 64], vec![127i8; 64]);
        assert_eq!(matmul_i8_nt(&lo, &lo, 1, 1, 64), [64 * 128 * 128]);
        assert_eq!(matmul_i8_nt(&lo, &hi, 1, 1, 64), [-64 * 128 * 127]);
    }
}
