//! Blocked f32 transposes, for the direct convolution's changes of layout between the
//! channel-major planes tensors hold and the position-major rows its register tiles read
//! and write.
//!
//! An element-at-a-time transpose reads or writes one value per cache line; on a 64-channel
//! convolution that was a fifth of the forward-and-backward time (AMD Zen 4, one thread).
//! Blocks of 8 x 8 touch 8 lines on each side, and on a CPU with AVX the block is turned in
//! eight registers.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::simd::Isa;

/// Side of a block.
pub const BLOCK: usize = 8;

/// A matrix stored in `data` with rows `stride` elements apart.
pub struct Strided<T> {
    pub data: T,
    pub stride: usize,
}

/// `dst[c][r] = src[r][c] + shift[c]` for `r < rows`, `c < cols` (no shift when `shift` is
/// `None`). `isa`, when given, must come from [`Isa::detect`].
///
/// # Panics
/// If either matrix is too short for `rows` x `cols`, or `shift` shorter than `cols`.
pub fn transpose(
    isa: Option<Isa>,
    src: Strided<&[f32]>,
    dst: Strided<&mut [f32]>,
    [rows, cols]: [usize; 2],
    shift: Option<&[f32]>,
) {
    if rows == 0 || cols == 0 {
        return;
    }
    assert!(
        src.data.len() >= (rows - 1) * src.stride + cols,
        "transpose reads past its source"
    );
    assert!(
        dst.data.len() >= (cols - 1) * dst.stride + rows,
        "transpose writes past its destination"
    );
    assert!(
        shift.is_none_or(|s| s.len() >= cols),
        "transpose shift too short"
    );
    let blocks = Blocks {
        src: src.data.as_ptr(),
        src_stride: src.stride,
        dst: dst.data.as_mut_ptr(),
        dst_stride: dst.stride,
        size: [rows, cols],
        shift,
    };
    #[cfg(target_arch = "x86_64")]
    if isa.is_some() {
        // SAFETY: `Isa::detect` found AVX2 or AVX-512, which include AVX; the asserts above
        // bound every access.
        unsafe { transpose_avx(blocks) };
        return;
    }
    let _ = isa;
    // SAFETY: as above.
    unsafe { transpose_blocks(blocks, |b, r0, c0| b.scalar_block(r0, c0, BLOCK, BLOCK)) }
}

/// The checked arguments of [`transpose`] as pointers.
struct Blocks<'a> {
    src: *const f32,
    src_stride: usize,
    dst: *mut f32,
    dst_stride: usize,
    size: [usize; 2],
    shift: Option<&'a [f32]>,
}

impl Blocks<'_> {
    /// One block of `h` x `w` from `(r0, c0)`, a value at a time.
    ///
    /// # Safety
    /// The block lies inside the checked `size`.
    #[inline(always)]
    unsafe fn scalar_block(&self, r0: usize, c0: usize, h: usize, w: usize) {
        for c in c0..c0 + w {
            let shift = self.shift.map_or(0.0, |s| s[c]);
            for r in r0..r0 + h {
                unsafe {
                    *self.dst.add(c * self.dst_stride + r) =
                        *self.src.add(r * self.src_stride + c) + shift;
                }
            }
        }
    }
}

/// Every whole block through `full`, the edges a value at a time.
///
/// # Safety
/// `b` was checked by [`transpose`]; `full` is sound for any whole block inside it.
#[inline(always)]
unsafe fn transpose_blocks(b: Blocks<'_>, full: impl Fn(&Blocks<'_>, usize, usize)) {
    let [rows, cols] = b.size;
    let (whole_rows, whole_cols) = (rows - rows % BLOCK, cols - cols % BLOCK);
    for r0 in (0..whole_rows).step_by(BLOCK) {
        for c0 in (0..whole_cols).step_by(BLOCK) {
            full(&b, r0, c0);
        }
    }
    unsafe {
        b.scalar_block(0, whole_cols, whole_rows, cols - whole_cols);
        b.scalar_block(whole_rows, 0, rows - whole_rows, cols);
    }
}

/// [`transpose_blocks`] with each whole block turned in eight AVX registers.
///
/// # Safety
/// The CPU runs AVX; `b` was checked by [`transpose`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
unsafe fn transpose_avx(b: Blocks<'_>) {
    unsafe {
        transpose_blocks(b, |b, r0, c0| {
            let src = b.src.add(r0 * b.src_stride + c0);
            let row = |i: usize| _mm256_loadu_ps(src.add(i * b.src_stride));
            // Pairs of rows interleaved, then quadruples, then the 128-bit halves swapped:
            // `cols[j]` holds column `c0 + j` of rows `r0..r0 + 8`.
            let lo = |i| _mm256_unpacklo_ps(row(i), row(i + 1));
            let hi = |i| _mm256_unpackhi_ps(row(i), row(i + 1));
            let (t0, t1, t2, t3) = (lo(0), hi(0), lo(2), hi(2));
            let (t4, t5, t6, t7) = (lo(4), hi(4), lo(6), hi(6));
            let s0 = _mm256_shuffle_ps::<0x44>(t0, t2);
            let s1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
            let s2 = _mm256_shuffle_ps::<0x44>(t1, t3);
            let s3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
            let s4 = _mm256_shuffle_ps::<0x44>(t4, t6);
            let s5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
            let s6 = _mm256_shuffle_ps::<0x44>(t5, t7);
            let s7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
            let cols = [
                _mm256_permute2f128_ps::<0x20>(s0, s4),
                _mm256_permute2f128_ps::<0x20>(s1, s5),
                _mm256_permute2f128_ps::<0x20>(s2, s6),
                _mm256_permute2f128_ps::<0x20>(s3, s7),
                _mm256_permute2f128_ps::<0x31>(s0, s4),
                _mm256_permute2f128_ps::<0x31>(s1, s5),
                _mm256_permute2f128_ps::<0x31>(s2, s6),
                _mm256_permute2f128_ps::<0x31>(s3, s7),
            ];
            for (j, col) in cols.into_iter().enumerate() {
                let col = match b.shift {
                    Some(s) => _mm256_add_ps(col, _mm256_set1_ps(s[c0 + j])),
                    None => col,
                };
                _mm256_storeu_ps(b.dst.add((c0 + j) * b.dst_stride + r0), col);
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_size_and_stride_matches_the_definition() {
        let mut isas: Vec<Option<Isa>> = Isa::available().into_iter().map(Some).collect();
        isas.push(None);
        for isa in isas {
            for (rows, cols) in [
                (1, 1),
                (8, 8),
                (28, 64),
                (64, 28),
                (13, 19),
                (3, 17),
                (0, 5),
            ] {
                for shifted in [false, true] {
                    let (src_stride, dst_stride) = (cols + 3, rows + 5);
                    let src: Vec<f32> = (0..rows * src_stride).map(|i| i as f32).collect();
                    let shift: Vec<f32> = (0..cols).map(|c| 0.5 - c as f32).collect();
                    let mut dst = vec![-1.0; cols * dst_stride];
                    transpose(
                        isa,
                        Strided {
                            data: &src,
                            stride: src_stride,
                        },
                        Strided {
                            data: &mut dst,
                            stride: dst_stride,
                        },
                        [rows, cols],
                        shifted.then_some(&shift[..]),
                    );
                    for c in 0..cols {
                        for r in 0..dst_stride {
                            let expected = if r < rows {
                                src[r * src_stride + c] + if shifted { shift[c] } else { 0.0 }
                            } else {
                                -1.0
                            };
                            assert_eq!(
                                dst[c * dst_stride + r],
                                expected,
                                "{isa:?} {rows}x{cols} at ({r}, {c})"
                            );
                        }
                    }
                }
            }
        }
    }
}
