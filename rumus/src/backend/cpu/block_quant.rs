//! Products of f32 activations with weights kept in GGML's blocks of 32 (`q4_0`, `q4_1`,
//! `q8_0`, as GGUF files store them), without dequantizing the weights: the work of a
//! language model's decode step, which reads every weight once per token and is bound by
//! memory, so weights that stay 4.5 to 8.5 bits wide are read 4 to 7 times faster than f32.
//!
//! Each 32-long block of an activation row is quantized to int8 with its own scale
//! (`dx = max|x| / 127`, `xq = round(x / dx)`), as llama.cpp does for these formats; a
//! block's product is then an exact integer sum times the two scales:
//!
//! - `q8_0` (`d`, 32 x i8 `q`): `d dx sum(q xq)`
//! - `q4_0` (`d`, 32 x 4-bit `q`, value `(q - 8) d`): `d dx (sum(q xq) - 8 sum(xq))`
//! - `q4_1` (`d`, `m`, 32 x 4-bit `q`, value `q d + m`): `d dx sum(q xq) + m dx sum(xq)`
//!
//! A 4-bit block holds element `j` in the low nibble of byte `j` and element `j + 16` in its
//! high nibble. The AVX2 kernel multiplies 32 unsigned weights by 32 signed activations in
//! one `vpmaddubsw` (a signed `q8_0` weight gives its sign to the activation first); without
//! AVX2 a plain loop computes the same integer sums. Weight rows are split across the rayon
//! pool; each output is one row's dot product, so any thread count gives the same bits.

use half::f16;
use rayon::prelude::*;

use super::parallel::threads;

/// Elements per block.
pub(crate) const BLOCK: usize = 32;

/// A block layout: what one block of 32 weights stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blocks {
    /// f16 scale, 16 bytes of 4-bit values offset by 8.
    Q4_0,
    /// f16 scale, f16 minimum, 16 bytes of 4-bit values.
    Q4_1,
    /// f16 scale, 32 int8 values.
    Q8_0,
}

impl Blocks {
    /// Bytes of one block.
    pub fn bytes(self) -> usize {
        match self {
            Blocks::Q4_0 => 18,
            Blocks::Q4_1 => 20,
            Blocks::Q8_0 => 34,
        }
    }

    /// Bytes before the values: the scale, and `q4_1`'s minimum.
    fn header(self) -> usize {
        match self {
            Blocks::Q4_1 => 4,
            Blocks::Q4_0 | Blocks::Q8_0 => 2,
        }
    }
}

/// The little-endian f16 at byte `at` of a block, as f32 (also the GGUF decoders' scales).
pub(crate) fn half_at(bytes: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([bytes[at], bytes[at + 1]]).to_f32()
}

/// The blocks of `raw` (whole blocks), appended to `out` as f32 (llama.cpp's
/// `dequantize_row_*`).
pub(crate) fn dequantize(kind: Blocks, raw: &[u8], out: &mut Vec<f32>) {
    for block in raw.chunks_exact(kind.bytes()) {
        let d = half_at(block, 0);
        let values = &block[kind.header()..];
        match kind {
            Blocks::Q8_0 => out.extend(values.iter().map(|&q| f32::from(q as i8) * d)),
            Blocks::Q4_0 | Blocks::Q4_1 => {
                let (offset, m) = if kind == Blocks::Q4_1 {
                    (0.0, half_at(block, 2))
                } else {
                    (-8.0, 0.0)
                };
                let value = |q: u8| (f32::from(q) + offset) * d + m;
                out.extend(values.iter().map(|&q| value(q & 0x0f)));
                out.extend(values.iter().map(|&q| value(q >> 4)));
            }
        }
    }
}

/// `values` (a whole number of blocks) quantized to `kind` by rounding to the nearest level
/// (llama.cpp's reference `quantize_row_*`): `q8_0` and `q4_0` scale by the block's largest
/// magnitude (`q4_0` keeping its sign, so that value lands exactly on level -8), `q4_1` spans
/// the block's minimum to its maximum in 15 steps.
pub(crate) fn quantize(kind: Blocks, values: &[f32], out: &mut Vec<u8>) {
    for block in values.chunks_exact(BLOCK) {
        let start = out.len();
        out.resize(start + kind.bytes(), 0);
        let dst = &mut out[start..];
        let scale_bits = |d: f32| f16::from_f32(d).to_le_bytes();
        match kind {
            Blocks::Q8_0 => {
                let peak = block.iter().fold(0.0f32, |p, v| p.max(v.abs()));
                let d = peak / 127.0;
                let inverse = if d == 0.0 { 0.0 } else { 1.0 / d };
                dst[..2].copy_from_slice(&scale_bits(d));
                for (q, &v) in dst[2..].iter_mut().zip(block) {
                    *q = (v * inverse).round() as i8 as u8;
                }
            }
            Blocks::Q4_0 => {
                let extreme = block
                    .iter()
                    .fold(0.0f32, |e, &v| if v.abs() > e.abs() { v } else { e });
                let d = extreme / -8.0;
                let inverse = if d == 0.0 { 0.0 } else { 1.0 / d };
                dst[..2].copy_from_slice(&scale_bits(d));
                let level = |v: f32| ((v * inverse + 8.5) as u8).min(15);
                for j in 0..BLOCK / 2 {
                    dst[2 + j] = level(block[j]) | level(block[j + BLOCK / 2]) << 4;
                }
            }
            Blocks::Q4_1 => {
                let (low, high) = block
                    .iter()
                    .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| {
                        (l.min(v), h.max(v))
                    });
                let d = (high - low) / 15.0;
                let inverse = if d == 0.0 { 0.0 } else { 1.0 / d };
                dst[..2].copy_from_slice(&scale_bits(d));
                dst[2..4].copy_from_slice(&scale_bits(low));
                let level = |v: f32| (((v - low) * inverse + 0.5) as u8).min(15);
                for j in 0..BLOCK / 2 {
                    dst[4 + j] = level(block[j]) | level(block[j + BLOCK / 2]) << 4;
                }
            }
        }
    }
}

/// Activation rows quantized per block of 32: int8 values, each block's scale `dx`, and each
/// block's `dx * sum(xq)` (what the offset or minimum of a 4-bit block multiplies).
struct QuantizedRows {
    values: Vec<i8>,
    scales: Vec<f32>,
    scaled_sums: Vec<f32>,
}

fn quantize_activations(x: &[f32]) -> QuantizedRows {
    let blocks = x.len() / BLOCK;
    let mut rows = QuantizedRows {
        values: vec![0; x.len()],
        scales: Vec::with_capacity(blocks),
        scaled_sums: Vec::with_capacity(blocks),
    };
    for (block, out) in x
        .chunks_exact(BLOCK)
        .zip(rows.values.chunks_exact_mut(BLOCK))
    {
        let peak = block.iter().fold(0.0f32, |p, v| p.max(v.abs()));
        // A NaN or infinity makes the scale NaN, so the block's products are NaN.
        let dx = if block.iter().all(|v| v.is_finite()) {
            peak / 127.0
        } else {
            f32::NAN
        };
        let inverse = if dx > 0.0 { 1.0 / dx } else { 0.0 };
        let mut sum = 0i32;
        for (q, &v) in out.iter_mut().zip(block) {
            // (round half away from zero, written without a library call per element)
            let r = (v * inverse).clamp(-127.0, 127.0);
            *q = (r + 0.5f32.copysign(r)) as i8;
            sum += i32::from(*q);
        }
        rows.scales.push(dx);
        rows.scaled_sums.push(dx * sum as f32);
    }
    rows
}

/// `out[i, j] = sum_t x[i, t] w[j, t]` for activations `x` `[m, k]` and weights `w`
/// `[n, k]` in `kind`'s blocks (`raw`, row-major, `k` a multiple of 32): `[m, n]`.
pub(crate) fn product(kind: Blocks, raw: &[u8], [m, n, k]: [usize; 3], x: &[f32]) -> Vec<f32> {
    debug_assert_eq!(k % BLOCK, 0);
    debug_assert_eq!(raw.len(), n * k / BLOCK * kind.bytes());
    debug_assert_eq!(x.len(), m * k);
    let activations = quantize_activations(x);
    let row_bytes = k / BLOCK * kind.bytes();
    let kernel = Kernel::detect();
    // Rows of weights per task: a few tasks per thread, none tiny, whole groups.
    let rows_per_task = n.div_ceil(threads() * 4).max(16).next_multiple_of(ROWS);
    let mut transposed = vec![0.0f32; n * m];
    let compute = |(chunk, out): (usize, &mut [f32])| {
        let mut unpacked = Vec::new();
        let first = chunk * rows_per_task;
        let rows = out.len() / m.max(1);
        for group in (0..rows).step_by(ROWS) {
            // (a short last group repeats its last row; those results are dropped)
            let mut weights: [&[u8]; ROWS] = [&[]; ROWS];
            for (r, weights) in weights.iter_mut().enumerate() {
                let row = first + (group + r).min(rows - 1);
                *weights = &raw[row * row_bytes..][..row_bytes];
            }
            let blocks = k / BLOCK;
            // With several activation rows, the group's blocks are unpacked once for all.
            let shared = (m > 1).then(|| {
                kernel.unpack(kind, weights, blocks, &mut unpacked);
                &unpacked[..]
            });
            let mut i = 0;
            while i + 1 < m {
                let pair = [i, i + 1];
                let sums = kernel.dots_pair(kind, weights, shared, &activations, pair, blocks);
                for (r, pair) in sums.iter().enumerate().take(rows - group) {
                    out[(group + r) * m + i] = pair[0];
                    out[(group + r) * m + i + 1] = pair[1];
                }
                i += 2;
            }
            if i < m {
                let sums = kernel.dots(kind, weights, shared, &activations, i * blocks, blocks);
                for (r, &sum) in sums.iter().enumerate().take(rows - group) {
                    out[(group + r) * m + i] = sum;
                }
            }
        }
    };
    if n * k * m >= super::parallel::PARALLEL_GRAIN && threads() > 1 {
        transposed
            .par_chunks_mut(rows_per_task * m.max(1))
            .enumerate()
            .for_each(compute);
    } else {
        transposed
            .chunks_mut(rows_per_task * m.max(1))
            .enumerate()
            .for_each(compute);
    }
    if m == 1 {
        return transposed;
    }
    // Back to `[m, n]` in 8 x 8 blocks: element by element, the writes `n` apart took a
    // tenth of a long prompt's time.
    let mut out = vec![0.0f32; m * n];
    super::transpose::transpose(
        super::simd::Isa::detect(),
        super::transpose::Strided {
            data: &transposed,
            stride: m,
        },
        super::transpose::Strided {
            data: &mut out,
            stride: n,
        },
        [n, m],
        None,
    );
    out
}

/// Weight rows one kernel call multiplies with the same activations: their blocks are read as
/// independent streams, and each activation block is loaded once for all of them.
const ROWS: usize = 4;

/// Which dot-product loop this CPU runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kernel {
    Plain,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX2 with AVX-VNNI's `vpdpbusd` for the integer sums (one instruction where AVX2 takes
    /// `vpmaddubsw` and `vpmaddwd`; the same sums, no intermediate saturates).
    #[cfg(target_arch = "x86_64")]
    AvxVnni,
}

impl Kernel {
    fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2")
            && is_x86_feature_detected!("fma")
            && is_x86_feature_detected!("f16c")
        {
            if is_x86_feature_detected!("avxvnni") {
                return Kernel::AvxVnni;
            }
            return Kernel::Avx2;
        }
        Kernel::Plain
    }

    /// [`ROWS`] weight rows (`blocks` blocks each) with activation blocks
    /// `first..first + blocks`; `unpacked`: the rows as [`Kernel::unpack`] left them.
    fn dots(
        self,
        kind: Blocks,
        weights: [&[u8]; ROWS],
        unpacked: Option<&[Unpacked]>,
        x: &QuantizedRows,
        first: usize,
        blocks: usize,
    ) -> [f32; ROWS] {
        match self {
            Kernel::Plain => weights.map(|w| plain_dot(kind, w, x, first, blocks)),
            // SAFETY: the CPU has AVX2, FMA and F16C (detected above), and AVX-VNNI for
            // `AvxVnni`.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { avx2::dots(kind, weights, unpacked, x, first, blocks) },
            #[cfg(target_arch = "x86_64")]
            Kernel::AvxVnni => unsafe {
                avx2::dots_vnni(kind, weights, unpacked, x, first, blocks)
            },
        }
    }

    /// [`Kernel::dots`] of the same weight rows with activation rows `pair` (of `blocks`
    /// blocks each): `[row][activation]`.
    fn dots_pair(
        self,
        kind: Blocks,
        weights: [&[u8]; ROWS],
        unpacked: Option<&[Unpacked]>,
        x: &QuantizedRows,
        pair: [usize; 2],
        blocks: usize,
    ) -> [[f32; 2]; ROWS] {
        match self {
            Kernel::Plain => {
                let [a, b] = pair.map(|i| self.dots(kind, weights, None, x, i * blocks, blocks));
                std::array::from_fn(|r| [a[r], b[r]])
            }
            // SAFETY: the CPU has what `detect` found.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { avx2::dots_pair(kind, weights, unpacked, x, pair, blocks) },
            #[cfg(target_arch = "x86_64")]
            Kernel::AvxVnni => unsafe {
                avx2::dots_pair_vnni(kind, weights, unpacked, x, pair, blocks)
            },
        }
    }

    /// The weight rows' blocks as the kernel multiplies them, into `out` (nothing for the
    /// plain loop, which reads the bytes).
    fn unpack(self, kind: Blocks, weights: [&[u8]; ROWS], blocks: usize, out: &mut Vec<Unpacked>) {
        out.clear();
        match self {
            Kernel::Plain => {}
            // SAFETY: the CPU has AVX2, FMA and F16C (detected in `detect`).
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 | Kernel::AvxVnni => unsafe {
                avx2::unpack_rows(kind, weights, blocks, out)
            },
        }
    }
}

/// One weight block ready for the vector kernel: its 32 values as bytes (4-bit ones as
/// unsigned 0..16, 8-bit ones signed), its scale and its minimum (q4_1; 0 otherwise).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Unpacked {
    values: [u8; BLOCK],
    d: f32,
    m: f32,
}

fn plain_dot(kind: Blocks, weights: &[u8], x: &QuantizedRows, first: usize, blocks: usize) -> f32 {
    let mut total = 0.0f32;
    for (b, block) in weights.chunks_exact(kind.bytes()).take(blocks).enumerate() {
        let xq = &x.values[(first + b) * BLOCK..][..BLOCK];
        let (dx, scaled_sum) = (x.scales[first + b], x.scaled_sums[first + b]);
        let d = half_at(block, 0);
        let values = &block[kind.header()..];
        let sum: i32 = match kind {
            Blocks::Q8_0 => values
                .iter()
                .zip(xq)
                .map(|(&q, &a)| i32::from(q as i8) * i32::from(a))
                .sum(),
            Blocks::Q4_0 | Blocks::Q4_1 => (0..BLOCK / 2)
                .map(|j| {
                    i32::from(values[j] & 0x0f) * i32::from(xq[j])
                        + i32::from(values[j] >> 4) * i32::from(xq[j + BLOCK / 2])
                })
                .sum(),
        };
        total += d * dx * sum as f32
            + match kind {
                Blocks::Q8_0 => 0.0,
                Blocks::Q4_0 => -8.0 * d * scaled_sum,
                Blocks::Q4_1 => half_at(block, 2) * scaled_sum,
            };
    }
    total
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{BLOCK, Blocks, QuantizedRows, ROWS, Unpacked};

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn half(bits: u16) -> f32 {
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
    }

    /// One block's 32 weights as vpmaddubsw takes them: 4-bit values as unsigned bytes in
    /// element order, 8-bit ones as they are (signed; [`products`] moves their signs).
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn unpack(kind: Blocks, values: *const u8) -> __m256i {
        // SAFETY (loads): the caller passes a whole block.
        match kind {
            Blocks::Q8_0 => unsafe { _mm256_loadu_si256(values.cast()) },
            Blocks::Q4_0 | Blocks::Q4_1 => {
                // The 16 bytes in both halves (a load, no shuffle); low nibbles from the first
                // half, high nibbles from the second: elements 0..16, then 16..32.
                let packed = unsafe { _mm256_broadcastsi128_si256(_mm_loadu_si128(values.cast())) };
                let mask = _mm256_set1_epi8(0x0f);
                let low = _mm256_and_si256(packed, mask);
                let high = _mm256_and_si256(_mm256_srli_epi16(packed, 4), mask);
                _mm256_blend_epi32(low, high, 0xf0)
            }
        }
    }

    /// The 32 integer products of unpacked weights `w` and 32 activations, as 8 i32 sums:
    /// `vpmaddubsw` then `vpmaddwd`, or with `VNNI` one `vpdpbusd` (whose caller must enable
    /// `avxvnni`). The pairs `vpmaddubsw` adds never saturate (at most 2 x 128 x 127), so
    /// both give the same sums.
    ///
    /// # Safety
    /// The CPU runs AVX2 (and AVX-VNNI with `VNNI`); `xq` is readable for 32 bytes.
    #[inline(always)]
    unsafe fn products<const VNNI: bool>(kind: Blocks, w: __m256i, xq: *const i8) -> __m256i {
        // SAFETY: as the caller promises.
        unsafe {
            let a = _mm256_loadu_si256(xq.cast());
            // |w| (unsigned) times x with w's sign: the same products, as both instructions
            // want an unsigned first operand.
            let (unsigned, signed) = match kind {
                Blocks::Q8_0 => (_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w)),
                Blocks::Q4_0 | Blocks::Q4_1 => (w, a),
            };
            if VNNI {
                _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), unsigned, signed)
            } else {
                _mm256_madd_epi16(_mm256_maddubs_epi16(unsigned, signed), _mm256_set1_epi16(1))
            }
        }
    }

    /// The entry points, each compiled for its instruction sets around the shared loops
    /// (`#[inline(always)]`, so the intrinsics inline into them).
    macro_rules! entry_points {
        ($features:literal, $vnni:literal, $pair:ident, $single:ident) => {
            /// [`dots`] of two activation rows.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $pair(
                kind: Blocks,
                weights: [&[u8]; ROWS],
                unpacked: Option<&[Unpacked]>,
                x: &QuantizedRows,
                pair: [usize; 2],
                blocks: usize,
            ) -> [[f32; 2]; ROWS] {
                // SAFETY: `rows` checks the lengths.
                unsafe { rows::<true, $vnni>(kind, weights, unpacked, x, pair, blocks) }
            }

            /// [`super::plain_dot`] of [`ROWS`] rows: the same integer sums, the scales
            /// applied in f32, in the order the pair entry point adds them for either of its
            /// rows.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $single(
                kind: Blocks,
                weights: [&[u8]; ROWS],
                unpacked: Option<&[Unpacked]>,
                x: &QuantizedRows,
                first: usize,
                blocks: usize,
            ) -> [f32; ROWS] {
                assert!(blocks == 0 || first.is_multiple_of(blocks));
                let row = first.checked_div(blocks).unwrap_or(0);
                // SAFETY: `rows` checks the lengths.
                let sums =
                    unsafe { rows::<false, $vnni>(kind, weights, unpacked, x, [row, row], blocks) };
                let mut out = [0.0; ROWS];
                for (r, out) in out.iter_mut().enumerate() {
                    *out = sums[r][0];
                }
                out
            }
        };
    }

    entry_points!("avx2,fma,f16c", false, dots_pair, dots);
    entry_points!("avx2,fma,f16c,avxvnni", true, dots_pair_vnni, dots_vnni);

    /// Checks every length `pair_of` reads within, then runs it for `kind`.
    ///
    /// # Safety
    /// The CPU runs AVX2, FMA and F16C (and AVX-VNNI with `VNNI`), enabled in the caller.
    #[inline(always)]
    unsafe fn rows<const TWO: bool, const VNNI: bool>(
        kind: Blocks,
        weights: [&[u8]; ROWS],
        unpacked: Option<&[Unpacked]>,
        x: &QuantizedRows,
        pair: [usize; 2],
        blocks: usize,
    ) -> [[f32; 2]; ROWS] {
        for w in weights {
            assert!(w.len() >= blocks * kind.bytes());
        }
        if let Some(u) = unpacked {
            assert!(u.len() >= ROWS * blocks);
        }
        for i in pair {
            assert!(
                x.values.len() >= (i + 1) * blocks * BLOCK && x.scales.len() >= (i + 1) * blocks
            );
        }
        // SAFETY: whole blocks (the asserts above).
        unsafe {
            match (kind, unpacked) {
                (Blocks::Q4_0, None) => pair_of::<Q4_0, TWO, VNNI>(weights, &[], x, pair, blocks),
                (Blocks::Q4_1, None) => pair_of::<Q4_1, TWO, VNNI>(weights, &[], x, pair, blocks),
                (Blocks::Q8_0, None) => pair_of::<Q8_0, TWO, VNNI>(weights, &[], x, pair, blocks),
                (Blocks::Q4_0, Some(u)) => {
                    pair_of::<UNPACKED_Q4_0, TWO, VNNI>(weights, u, x, pair, blocks)
                }
                (Blocks::Q4_1, Some(u)) => {
                    pair_of::<UNPACKED_Q4_1, TWO, VNNI>(weights, u, x, pair, blocks)
                }
                (Blocks::Q8_0, Some(u)) => {
                    pair_of::<UNPACKED_Q8_0, TWO, VNNI>(weights, u, x, pair, blocks)
                }
            }
        }
    }

    /// The rows' blocks unpacked, row after row, into `out`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn unpack_rows(
        kind: Blocks,
        weights: [&[u8]; ROWS],
        blocks: usize,
        out: &mut Vec<Unpacked>,
    ) {
        let (size, header) = (kind.bytes(), kind.header());
        for w in weights {
            for block in w.chunks_exact(size).take(blocks) {
                let mut u = Unpacked {
                    d: half(u16::from_le_bytes([block[0], block[1]])),
                    m: if kind == Blocks::Q4_1 {
                        half(u16::from_le_bytes([block[2], block[3]]))
                    } else {
                        0.0
                    },
                    ..Unpacked::default()
                };
                // SAFETY: a whole block (chunks_exact), 32 bytes written.
                unsafe {
                    let values = unpack(kind, block.as_ptr().add(header));
                    _mm256_storeu_si256(u.values.as_mut_ptr().cast(), values);
                }
                out.push(u);
            }
        }
    }

    /// Each weight row's sums with one or two activation rows: per block, the integer sums
    /// of 32 products (8 lanes) scaled by `d * dx` into the pair's own accumulator, and the
    /// 4-bit layouts' offset (`-8 d`) or minimum (`m`) times the block's `dx * sum(xq)` in a
    /// scalar sum; then the lanes added and the scalar. Each row's arithmetic is the same
    /// whether it comes alone or in a pair, so a sequence's sums do not depend on its
    /// neighbours in a batch. `CODE` is the layout, plus [`UNPACKED`] where the weights come
    /// from `unpacked` (the same values, read instead of decoded).
    ///
    /// # Safety
    /// As [`rows`], which checked the lengths.
    #[inline(always)]
    unsafe fn pair_of<const CODE: u8, const TWO: bool, const VNNI: bool>(
        weights: [&[u8]; ROWS],
        unpacked: &[Unpacked],
        x: &QuantizedRows,
        pair: [usize; 2],
        blocks: usize,
    ) -> [[f32; 2]; ROWS] {
        let kind = kind_of(CODE & !UNPACKED);
        let from_unpacked = CODE & UNPACKED != 0;
        let (size, header) = (kind.bytes(), kind.header());
        // Loops and literal arrays here rather than `array::map` or `array::from_fn`: those
        // are not `#[inline]`, and where codegen units are not inlined into each other they
        // were calls in this loop (three per block: a third of a decode step).
        let mut bases = [std::ptr::null(); ROWS];
        for (r, base) in bases.iter_mut().enumerate() {
            *base = weights[r].as_ptr();
        }
        let firsts = [pair[0] * blocks, pair[1] * blocks];
        let rows = if TWO { 2 } else { 1 };
        // SAFETY: the caller enabled AVX.
        let mut acc = [[unsafe { _mm256_setzero_ps() }; 2]; ROWS];
        let mut offsets = [[0.0f32; 2]; ROWS];
        for k in 0..blocks {
            // SAFETY (every access): block `k` of each weight row and of each activation
            // row, inside them (the caller's asserts).
            unsafe {
                let [f0, f1] = firsts;
                let dx = [
                    *x.scales.get_unchecked(f0 + k),
                    *x.scales.get_unchecked(f1 + k),
                ];
                let scaled_sum = [
                    *x.scaled_sums.get_unchecked(f0 + k),
                    *x.scaled_sums.get_unchecked(f1 + k),
                ];
                let xq = [
                    x.values.as_ptr().add((f0 + k) * BLOCK),
                    x.values.as_ptr().add((f1 + k) * BLOCK),
                ];
                for r in 0..ROWS {
                    let (d, m, w) = if from_unpacked {
                        let u = unpacked.get_unchecked(r * blocks + k);
                        (u.d, u.m, _mm256_loadu_si256(u.values.as_ptr().cast()))
                    } else {
                        let block = bases[r].add(k * size);
                        // Four rows stream at once, a 20-byte block at a time: ask for each
                        // row's bytes a few lines ahead (past the row's end is harmless: a
                        // prefetch never faults).
                        _mm_prefetch::<_MM_HINT_T0>(block.wrapping_add(PREFETCH_AHEAD).cast());
                        let (d, m) = if kind == Blocks::Q4_1 {
                            // Scale and minimum converted by one `vcvtph2ps`.
                            let both = _mm_cvtph_ps(_mm_cvtsi32_si128(
                                block.cast::<i32>().read_unaligned(),
                            ));
                            (_mm_cvtss_f32(both), _mm_cvtss_f32(_mm_movehdup_ps(both)))
                        } else {
                            (half(block.cast::<u16>().read_unaligned()), 0.0)
                        };
                        (d, m, unpack(kind, block.add(header)))
                    };
                    for j in 0..rows {
                        let sums = _mm256_cvtepi32_ps(products::<VNNI>(kind, w, xq[j]));
                        let scale = _mm256_set1_ps(d * dx[j]);
                        acc[r][j] = _mm256_fmadd_ps(sums, scale, acc[r][j]);
                        match kind {
                            Blocks::Q4_0 => offsets[r][j] -= 8.0 * d * scaled_sum[j],
                            Blocks::Q4_1 => offsets[r][j] += m * scaled_sum[j],
                            Blocks::Q8_0 => {}
                        }
                    }
                }
            }
        }
        let mut sums = [[0.0; 2]; ROWS];
        for (r, row) in sums.iter_mut().enumerate() {
            for (j, sum) in row.iter_mut().enumerate() {
                // SAFETY: the caller enabled AVX2.
                *sum = unsafe { horizontal_sum(acc[r][j]) } + offsets[r][j];
            }
        }
        sums
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    fn horizontal_sum(v: __m256) -> f32 {
        let folded = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let folded = _mm_add_ps(folded, _mm_movehl_ps(folded, folded));
        let folded = _mm_add_ss(folded, _mm_shuffle_ps(folded, folded, 1));
        _mm_cvtss_f32(folded)
    }

    fn kind_of(code: u8) -> Blocks {
        match code {
            Q4_0 => Blocks::Q4_0,
            Q4_1 => Blocks::Q4_1,
            _ => Blocks::Q8_0,
        }
    }

    const Q4_0: u8 = 0;
    const Q4_1: u8 = 1;
    const Q8_0: u8 = 2;
    /// Added to a layout's code: the weights come unpacked.
    const UNPACKED: u8 = 4;
    const UNPACKED_Q4_0: u8 = Q4_0 | UNPACKED;
    const UNPACKED_Q4_1: u8 = Q4_1 | UNPACKED;
    const UNPACKED_Q8_0: u8 = Q8_0 | UNPACKED;

    /// Bytes ahead of the block in use that [`pair_of`] prefetches in each weight row.
    const PREFETCH_AHEAD: usize = 384;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks of every byte pattern a file may hold: random levels and scales, with `q8_0`
    /// values of -128 (which no quantizer writes but a file may).
    fn random_blocks(kind: Blocks, blocks: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as u32
        };
        let mut raw = Vec::new();
        for _ in 0..blocks {
            let scale = |bits: u32| f16::from_f32((bits % 1000) as f32 / 4000.0 - 0.1);
            raw.extend(scale(next()).to_le_bytes());
            if kind == Blocks::Q4_1 {
                raw.extend(scale(next()).to_le_bytes());
            }
            let values = kind.bytes() - kind.header();
            raw.extend((0..values).map(|i| if i == 3 { 0x80 } else { next() as u8 }));
        }
        raw
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_avx2_kernel_sums_what_the_plain_loop_sums() {
        if !matches!(Kernel::detect(), Kernel::Avx2) {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        for kind in [Blocks::Q4_0, Blocks::Q4_1, Blocks::Q8_0] {
            let (n, k) = (5, 7 * BLOCK);
            let raw = random_blocks(kind, n * k / BLOCK, 7);
            let x: Vec<f32> = (0..2 * k)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
                .collect();
            let activations = quantize_activations(&x);
            let row_bytes = k / BLOCK * kind.bytes();
            let weights: [&[u8]; ROWS] =
                std::array::from_fn(|r| &raw[(r % n) * row_bytes..][..row_bytes]);
            let pair = Kernel::Avx2.dots_pair(kind, weights, None, &activations, [0, 1], k / BLOCK);
            let mut unpacked = Vec::new();
            Kernel::Avx2.unpack(kind, weights, k / BLOCK, &mut unpacked);
            let shared = Some(&unpacked[..]);
            let from_unpacked =
                Kernel::Avx2.dots_pair(kind, weights, shared, &activations, [0, 1], k / BLOCK);
            let alone_unpacked: Vec<[f32; ROWS]> = (0..2)
                .map(|i| {
                    let first = i * k / BLOCK;
                    Kernel::Avx2.dots(kind, weights, shared, &activations, first, k / BLOCK)
                })
                .collect();
            for i in 0..2 {
                let first = i * k / BLOCK;
                let plain = Kernel::Plain.dots(kind, weights, None, &activations, first, k / BLOCK);
                let fast = Kernel::Avx2.dots(kind, weights, None, &activations, first, k / BLOCK);
                for (r, (p, f)) in plain.iter().zip(fast).enumerate() {
                    assert!(
                        (p - f).abs() <= 1e-5 * p.abs().max(1.0),
                        "{kind:?} row {r}, input {i}: {p} vs {f}"
                    );
                    // Two activation rows at once, and from unpacked blocks: each row's
                    // sums exactly as alone.
                    assert_eq!(pair[r][i], f, "{kind:?} row {r}, input {i} of a pair");
                    assert_eq!(
                        from_unpacked[r][i], f,
                        "{kind:?} row {r}, input {i} unpacked"
                    );
                    assert_eq!(alone_unpacked[i][r], f, "{kind:?} row {r}, input {i}");
                }
            }
        }
    }
}
