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
//! high nibble. Matrices are held with each eight rows' blocks interleaved ([`interleave`]),
//! so the vector kernels (AVX2, and AVX-VNNI's `vpdpbusd` where present) compute eight rows'
//! sums in the lanes of one vector; without AVX2 a plain loop computes the same sums. Groups
//! of rows are split across the rayon pool; every kernel adds each row's blocks in the plain
//! loop's order with its rounding, so any kernel and any thread count give the same bits.

use half::f16;
use rayon::prelude::*;

use super::parallel::threads;
use crate::error::Result;

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

/// Weight rows the kernels multiply at once: each lane of an 8-wide vector holds one row's
/// sum, so a block's scales, minimums and integer sums serve eight rows per instruction.
pub(crate) const GROUP: usize = 8;

/// The weights as the kernels read them: groups of [`GROUP`] rows (the last one padded with
/// zero blocks), each group block after block, and each group block holding the eight rows'
/// f16 scales, then (`q4_1`) their f16 minimums, then their value bytes four at a time:
/// bytes `4c..4c + 4` of every row, row after row, then those of chunk `c + 1`. A 32-byte
/// load of chunk `c` gives each row's elements `4c..4c + 4` in its own lane (a 4-bit block's
/// low nibbles; the high nibbles are elements `16 + 4c..`), which is what `vpdpbusd` sums,
/// so a block of eight rows takes eight multiply-add instructions and one scale each, where
/// row by row each row's block took its own scale conversion, broadcast and horizontal work
/// (three times the instructions). The same bytes as the file's layout, reordered.
///
/// # Errors
/// No memory for it.
pub(crate) fn interleave(kind: Blocks, raw: &[u8], rows: usize, k: usize) -> Result<Vec<u8>> {
    let (size, blocks) = (kind.bytes(), k / BLOCK);
    let len = rows.div_ceil(GROUP) * GROUP * blocks * size;
    let mut packed = crate::alloc::try_with_capacity("BlockQuantized", "its blocks", len)?;
    packed.resize(len, 0);
    for row in 0..rows {
        for b in 0..blocks {
            let block = &raw[(row * blocks + b) * size..][..size];
            let group_block =
                &mut packed[group_block_start(kind, blocks, row, b)..][..GROUP * size];
            for (file, grouped, len) in placements(kind, row % GROUP) {
                group_block[grouped..grouped + len].copy_from_slice(&block[file..file + len]);
            }
        }
    }
    Ok(packed)
}

/// Row `row`'s blocks in the file's layout, appended to `out` (the inverse of
/// [`interleave`] for one row).
pub(crate) fn row_blocks(kind: Blocks, packed: &[u8], k: usize, row: usize, out: &mut Vec<u8>) {
    let (size, blocks) = (kind.bytes(), k / BLOCK);
    for b in 0..blocks {
        let group_block = &packed[group_block_start(kind, blocks, row, b)..][..GROUP * size];
        let start = out.len();
        out.resize(start + size, 0);
        for (file, grouped, len) in placements(kind, row % GROUP) {
            out[start + file..start + file + len]
                .copy_from_slice(&group_block[grouped..grouped + len]);
        }
    }
}

/// Where block `b` of `row`'s group starts in the interleaved layout.
fn group_block_start(kind: Blocks, blocks: usize, row: usize, b: usize) -> usize {
    ((row / GROUP) * blocks + b) * GROUP * kind.bytes()
}

/// For lane `r` of a group block: each piece of a file block as (offset in the file's
/// block, offset in the group block, length).
fn placements(kind: Blocks, r: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let header = kind.header();
    let scale = (0, 2 * r, 2);
    let minimum = (kind == Blocks::Q4_1).then_some((2, 2 * GROUP + 2 * r, 2));
    let chunks = (0..(kind.bytes() - header) / 4)
        .map(move |c| (header + 4 * c, header * GROUP + 32 * c + 4 * r, 4));
    std::iter::once(scale).chain(minimum).chain(chunks)
}

/// Activation rows quantized per block of 32: int8 values, each block's scale `dx`, each
/// block's `dx * sum(xq)` (what the offset or minimum of a 4-bit block multiplies) and its
/// integer `sum(xq)`.
struct QuantizedRows {
    values: Vec<i8>,
    scales: Vec<f32>,
    scaled_sums: Vec<f32>,
    sums: Vec<i32>,
}

fn quantize_activations(x: &[f32]) -> QuantizedRows {
    let blocks = x.len() / BLOCK;
    let mut rows = QuantizedRows {
        values: vec![0; x.len()],
        scales: Vec::with_capacity(blocks),
        scaled_sums: Vec::with_capacity(blocks),
        sums: Vec::with_capacity(blocks),
    };
    for (block, out) in x
        .chunks_exact(BLOCK)
        .zip(rows.values.chunks_exact_mut(BLOCK))
    {
        let peak = block.iter().fold(0.0f32, |p, v| p.max(v.abs()));
        let mut sum = 0i32;
        // A NaN or infinity makes the scale NaN, so the block's products are NaN (its values
        // stay 0).
        let dx = if block.iter().all(|v| v.is_finite()) {
            let dx = peak / 127.0;
            let inverse = if dx > 0.0 { 1.0 / dx } else { 0.0 };
            for (q, &v) in out.iter_mut().zip(block) {
                // Round half away from zero: `r` is within +-127.5, so the conversion is
                // exact and needs no saturating (the loop vectorizes; `as` would saturate
                // element by element).
                let r = (v * inverse).clamp(-127.0, 127.0);
                // SAFETY: finite and within i32's range (the clamp above).
                let level = unsafe { (r + 0.5f32.copysign(r)).to_int_unchecked::<i32>() };
                *q = level as i8;
                sum += level;
            }
            dx
        } else {
            f32::NAN
        };
        rows.scales.push(dx);
        rows.scaled_sums.push(dx * sum as f32);
        rows.sums.push(sum);
    }
    rows
}

/// `out[i, j] = sum_t x[i, t] w[j, t]` for activations `x` `[m, k]` and weights `w`
/// `[n, k]` in `kind`'s blocks, interleaved ([`interleave`]; `k` a multiple of 32): `[m, n]`.
/// Each output is [`plain_dot`]'s sum bit for bit, whatever the kernel, the thread count or
/// the other rows of `x`.
pub(crate) fn product(kind: Blocks, packed: &[u8], [m, n, k]: [usize; 3], x: &[f32]) -> Vec<f32> {
    debug_assert_eq!(k % BLOCK, 0);
    let (blocks, groups) = (k / BLOCK, n.div_ceil(GROUP));
    let group_bytes = blocks * GROUP * kind.bytes();
    debug_assert_eq!(packed.len(), groups * group_bytes);
    debug_assert_eq!(x.len(), m * k);
    let activations = quantize_activations(x);
    let kernel = Kernel::detect();
    // Each group's sums for every activation row, [group][row][lane].
    let mut grouped = vec![0.0f32; groups * m * GROUP];
    let per_group = (m * GROUP).max(1);
    // Groups per task: a few tasks per thread, none tiny.
    let groups_per_task = groups.div_ceil(threads() * 4).max(2);
    let compute = |(task, out): (usize, &mut [f32])| {
        let first = task * groups_per_task;
        for (g, out) in out.chunks_exact_mut(per_group).enumerate() {
            let group = &packed[(first + g) * group_bytes..][..group_bytes];
            kernel.group_sums(kind, group, blocks, &activations, out);
        }
    };
    if n * k * m >= super::parallel::PARALLEL_GRAIN && threads() > 1 {
        grouped
            .par_chunks_mut(groups_per_task * per_group)
            .enumerate()
            .for_each(compute);
    } else {
        grouped
            .chunks_mut(groups_per_task * per_group)
            .enumerate()
            .for_each(compute);
    }
    if m == 1 {
        grouped.truncate(n);
        return grouped;
    }
    let mut out = vec![0.0f32; m * n];
    for (g, sums) in grouped.chunks_exact(per_group).enumerate() {
        let lanes = GROUP.min(n - g * GROUP);
        for (i, row) in sums.chunks_exact(GROUP).enumerate() {
            let at = i * n + g * GROUP;
            if lanes == GROUP {
                // A fixed-size move (a `memcpy` call per eight floats was 2% of a prompt).
                let whole: &mut [f32; GROUP] =
                    (&mut out[at..at + GROUP]).try_into().expect("eight");
                *whole = row.try_into().expect("eight");
            } else {
                out[at..at + lanes].copy_from_slice(&row[..lanes]);
            }
        }
    }
    out
}

/// Which loops this CPU runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kernel {
    Plain,
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX2 with AVX-VNNI's `vpdpbusd` for the integer sums (one instruction where AVX2 takes
    /// `vpmaddubsw` and `vpmaddwd`; the same sums).
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

    /// One group's (`blocks` interleaved blocks of [`GROUP`] rows) sums with every row of
    /// `x`, into `out` `[rows of x][GROUP]`.
    fn group_sums(
        self,
        kind: Blocks,
        group: &[u8],
        blocks: usize,
        x: &QuantizedRows,
        out: &mut [f32],
    ) {
        match self {
            Kernel::Plain => {
                let mut row = Vec::new();
                for r in 0..GROUP {
                    row.clear();
                    row_blocks(kind, group, blocks * BLOCK, r, &mut row);
                    for (i, sums) in out.chunks_exact_mut(GROUP).enumerate() {
                        sums[r] = plain_dot(kind, &row, x, i * blocks, blocks);
                    }
                }
            }
            // SAFETY: the CPU has AVX2, FMA and F16C (detected above), and AVX-VNNI for
            // `AvxVnni`.
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { avx2::group_sums(kind, group, blocks, x, out) },
            #[cfg(target_arch = "x86_64")]
            Kernel::AvxVnni => unsafe { avx2::group_sums_vnni(kind, group, blocks, x, out) },
        }
    }
}

/// One weight row (`blocks` blocks in the file's layout) with activation blocks
/// `first..first + blocks`: per block, the exact integer sum times `d dx`, plus the offset's
/// or minimum's share, added block after block. The reference every kernel equals.
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

    use super::{BLOCK, Blocks, GROUP, QuantizedRows};

    /// The entry points, each compiled for its instruction sets around the shared loops
    /// (`#[inline(always)]`, so the intrinsics inline into them).
    macro_rules! entry_point {
        ($features:literal, $vnni:literal, $name:ident) => {
            /// [`super::Kernel::group_sums`] on this instruction set.
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name(
                kind: Blocks,
                group: &[u8],
                blocks: usize,
                x: &QuantizedRows,
                out: &mut [f32],
            ) {
                // SAFETY: `rows` checks the lengths; the caller's CPU runs `$features`.
                unsafe {
                    match kind {
                        Blocks::Q4_0 => rows::<Q4_0, $vnni>(group, blocks, x, out),
                        Blocks::Q4_1 => rows::<Q4_1, $vnni>(group, blocks, x, out),
                        Blocks::Q8_0 => rows::<Q8_0, $vnni>(group, blocks, x, out),
                    }
                }
            }
        };
    }

    entry_point!("avx2,fma,f16c", false, group_sums);
    entry_point!("avx2,fma,f16c,avxvnni", true, group_sums_vnni);

    const Q4_0: u8 = 0;
    const Q4_1: u8 = 1;
    const Q8_0: u8 = 2;

    fn kind_of(code: u8) -> Blocks {
        match code {
            Q4_0 => Blocks::Q4_0,
            Q4_1 => Blocks::Q4_1,
            _ => Blocks::Q8_0,
        }
    }

    /// Checks the lengths [`sums`] reads and writes within, then runs it over the activation
    /// rows, four at a time (the group's weights unpacked once for the four) and then one.
    ///
    /// # Safety
    /// The CPU runs AVX2, FMA and F16C (and AVX-VNNI with `VNNI`), enabled in the caller.
    #[inline(always)]
    unsafe fn rows<const CODE: u8, const VNNI: bool>(
        group: &[u8],
        blocks: usize,
        x: &QuantizedRows,
        out: &mut [f32],
    ) {
        let m = out.len() / GROUP;
        assert!(group.len() >= blocks * GROUP * kind_of(CODE).bytes());
        assert!(x.values.len() >= m * blocks * BLOCK && x.scales.len() >= m * blocks);
        assert!(x.scaled_sums.len() >= m * blocks && x.sums.len() >= m * blocks);
        let mut i = 0;
        while i + 4 <= m {
            // SAFETY: the asserts above.
            let totals =
                unsafe { sums::<CODE, VNNI, 4>(group, blocks, x, [i, i + 1, i + 2, i + 3]) };
            for (j, total) in totals.into_iter().enumerate() {
                // SAFETY: row `i + j < m` of `out`.
                unsafe { _mm256_storeu_ps(out.as_mut_ptr().add((i + j) * GROUP), total) };
            }
            i += 4;
        }
        while i < m {
            // SAFETY: as above.
            let [total] = unsafe { sums::<CODE, VNNI, 1>(group, blocks, x, [i]) };
            // SAFETY: row `i < m` of `out`.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(i * GROUP), total) };
            i += 1;
        }
    }

    /// The group's eight rows' sums (one per lane) with activation rows `rows`: per block,
    /// the block's eight value vectors (lane `r`: row `r`'s elements `4v..4v + 4` in vector
    /// `v`) unpacked once, then for each activation row eight four-element multiply-adds
    /// against its elements `4v..4v + 4` broadcast, and the scales applied as
    /// [`super::plain_dot`] applies them, in the same order (no fused multiply-add), so each
    /// lane is that loop's sum bit for bit.
    ///
    /// # Safety
    /// As [`rows`], which checked the lengths.
    #[inline(always)]
    unsafe fn sums<const CODE: u8, const VNNI: bool, const J: usize>(
        group: &[u8],
        blocks: usize,
        x: &QuantizedRows,
        rows: [usize; J],
    ) -> [__m256; J] {
        let kind = kind_of(CODE);
        let (size, header) = (kind.bytes(), kind.header());
        // SAFETY (every access): block `b` of the group and of each activation row, inside
        // them (the caller's asserts).
        unsafe {
            let mut totals = [_mm256_setzero_ps(); J];
            let low_nibbles = _mm256_set1_epi8(0x0f);
            for b in 0..blocks {
                let block = group.as_ptr().add(b * GROUP * size);
                let d = _mm256_cvtph_ps(_mm_loadu_si128(block.cast()));
                let values = block.add(header * GROUP);
                let mut w = [_mm256_setzero_si256(); 8];
                if CODE == Q8_0 {
                    for (v, w) in w.iter_mut().enumerate() {
                        let signed = _mm256_loadu_si256(values.add(32 * v).cast());
                        // `vpdpbusd` wants unsigned weights: q + 128, whose extra 128 sum(xq)
                        // comes off the integer sum below.
                        *w = if VNNI {
                            _mm256_xor_si256(signed, _mm256_set1_epi8(-128))
                        } else {
                            signed
                        };
                    }
                } else {
                    for c in 0..4 {
                        let packed = _mm256_loadu_si256(values.add(32 * c).cast());
                        w[c] = _mm256_and_si256(packed, low_nibbles);
                        w[c + 4] = _mm256_and_si256(_mm256_srli_epi16(packed, 4), low_nibbles);
                    }
                }
                let offset_scale = match kind {
                    Blocks::Q4_1 => _mm256_cvtph_ps(_mm_loadu_si128(block.add(2 * GROUP).cast())),
                    Blocks::Q4_0 => _mm256_mul_ps(_mm256_set1_ps(-8.0), d),
                    Blocks::Q8_0 => _mm256_setzero_ps(),
                };
                for (j, &i) in rows.iter().enumerate() {
                    let at = i * blocks + b;
                    let xq = x.values.as_ptr().add(at * BLOCK);
                    let mut halves = [_mm256_setzero_si256(); 2];
                    for v in 0..8 {
                        let xv = _mm256_set1_epi32(xq.add(4 * v).cast::<i32>().read_unaligned());
                        halves[v % 2] = multiply_add::<CODE, VNNI>(halves[v % 2], w[v], xv);
                    }
                    let mut sum = _mm256_add_epi32(halves[0], halves[1]);
                    if VNNI && CODE == Q8_0 {
                        let extra = _mm256_set1_epi32(128 * *x.sums.get_unchecked(at));
                        sum = _mm256_sub_epi32(sum, extra);
                    }
                    let dx = _mm256_set1_ps(*x.scales.get_unchecked(at));
                    let scaled_sum = _mm256_set1_ps(*x.scaled_sums.get_unchecked(at));
                    let product = _mm256_mul_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(sum));
                    let offset = _mm256_mul_ps(offset_scale, scaled_sum);
                    totals[j] = _mm256_add_ps(totals[j], _mm256_add_ps(product, offset));
                }
            }
            totals
        }
    }

    /// `acc` plus, in each 32-bit lane, the sum of the four products of `w`'s bytes (unsigned
    /// 4-bit levels, `q8_0` values shifted by 128 with `VNNI`, signed ones without) and `x`'s
    /// bytes (signed): `vpdpbusd`, or `vpmaddubsw` and `vpmaddwd` (a signed weight giving its
    /// sign to the activation first; no pair saturates: at most 2 x 128 x 127).
    #[inline(always)]
    unsafe fn multiply_add<const CODE: u8, const VNNI: bool>(
        acc: __m256i,
        w: __m256i,
        x: __m256i,
    ) -> __m256i {
        // SAFETY: the caller enabled the instruction sets.
        unsafe {
            if VNNI {
                _mm256_dpbusd_avx_epi32(acc, w, x)
            } else {
                let (unsigned, signed) = if CODE == Q8_0 {
                    (_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w))
                } else {
                    (w, x)
                };
                let pairs = _mm256_maddubs_epi16(unsigned, signed);
                _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)))
            }
        }
    }
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

    /// Every kernel this CPU has gives each output exactly as the plain loop over the file's
    /// layout, for each layout, with a number of rows that leaves the last group short, and
    /// with one to six activation rows (the four-row loop and the one-row loop).
    #[test]
    fn every_kernel_sums_what_the_plain_loop_sums() {
        let mut kernels = vec![Kernel::Plain];
        #[cfg(target_arch = "x86_64")]
        match Kernel::detect() {
            Kernel::AvxVnni => kernels.extend([Kernel::Avx2, Kernel::AvxVnni]),
            Kernel::Avx2 => kernels.push(Kernel::Avx2),
            Kernel::Plain => eprintln!("this CPU has no AVX2: the plain kernel alone"),
        }
        for kind in [Blocks::Q4_0, Blocks::Q4_1, Blocks::Q8_0] {
            let (n, blocks) = (13, 7);
            let k = blocks * BLOCK;
            let raw = random_blocks(kind, n * blocks, 7);
            let packed = interleave(kind, &raw, n, k).unwrap();
            let row_bytes = blocks * kind.bytes();
            for m in 1..=6 {
                let x: Vec<f32> = (0..m * k)
                    .map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0)
                    .collect();
                let activations = quantize_activations(&x);
                for &kernel in &kernels {
                    for g in 0..n.div_ceil(GROUP) {
                        let group_bytes = blocks * GROUP * kind.bytes();
                        let group = &packed[g * group_bytes..][..group_bytes];
                        let mut out = vec![f32::NAN; m * GROUP];
                        kernel.group_sums(kind, group, blocks, &activations, &mut out);
                        for row in g * GROUP..n.min((g + 1) * GROUP) {
                            let weights = &raw[row * row_bytes..][..row_bytes];
                            for i in 0..m {
                                let plain =
                                    plain_dot(kind, weights, &activations, i * blocks, blocks);
                                let got = out[i * GROUP + row % GROUP];
                                assert_eq!(
                                    got.to_bits(),
                                    plain.to_bits(),
                                    "{kernel:?} {kind:?} row {row}, input {i} of {m}: {got} vs {plain}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }

    /// Interleaving and taking a row back out give the file's bytes.
    #[test]
    fn interleaved_rows_come_back_as_the_file_stored_them() {
        for kind in [Blocks::Q4_0, Blocks::Q4_1, Blocks::Q8_0] {
            let (n, blocks) = (11, 3);
            let raw = random_blocks(kind, n * blocks, 3);
            let packed = interleave(kind, &raw, n, blocks * BLOCK).unwrap();
            assert_eq!(
                packed.len(),
                16 * blocks * kind.bytes(),
                "{kind:?}: two groups"
            );
            let mut back = Vec::new();
            for row in 0..n {
                row_blocks(kind, &packed, blocks * BLOCK, row, &mut back);
            }
            assert_eq!(back, raw, "{kind:?}");
        }
    }
}
