//! The register tiles of the direct convolution ([`direct_conv`](super::direct_conv)):
//! `out[p, r] (+)= sum_k src[offsets[k] + p] * a[k, r]` and the weight gradient's
//! `out[k, r] += sum_p src[offsets[k] + p] * dy[p, r]`, compiled once per instruction set
//! and tile shape, with the aligned buffers and packed matrices they read.
//!
//! Tiles broadcast `src` values (scalars, so a shifted tap costs nothing) and multiply them
//! with aligned vectors across the output channels `r`: vector loads of the shifted input
//! itself would straddle cache lines at most offsets (measured: 15% of the forward's time).
//! The vectorised matrix is cut into chunks that stay in L1 while every tile passes over
//! them.

#[cfg(target_arch = "x86_64")]
use super::simd::{F32x8, F32x16};
use super::simd::{Isa, Lanes};

/// Elements of the vectorised matrix kept hot per chunk (24 KiB: half of a 48 KiB L1).
const CHUNK_ELEMENTS: usize = 6 * 1024;
/// Taps per weight-gradient tile (one broadcast pointer each).
pub(super) const GRAD_TAPS: usize = 6;

/// An f32 buffer whose first element sits on a 64-byte boundary, so vector loads of rows
/// whose length is a multiple of 16 never straddle cache lines.
pub(super) struct Aligned {
    buf: Vec<f32>,
    start: usize,
    len: usize,
}

impl Aligned {
    pub(super) fn zeroed(len: usize) -> Aligned {
        let buf = vec![0.0f32; len + 16];
        let start = buf.as_ptr().align_offset(64).min(16);
        Aligned { buf, start, len }
    }

    pub(super) fn as_slice(&self) -> &[f32] {
        &self.buf[self.start..self.start + self.len]
    }

    pub(super) fn as_mut_slice(&mut self) -> &mut [f32] {
        &mut self.buf[self.start..self.start + self.len]
    }
}

/// A matrix `[K, R]` with rows padded to `stride` (a whole number of register tiles) and
/// zero past `R`.
pub(super) struct Rows {
    data: Aligned,
    count: usize,
    pub(super) stride: usize,
}

impl Rows {
    pub(super) fn new(
        count: usize,
        width: usize,
        tile: usize,
        value: impl Fn(usize, usize) -> f32,
    ) -> Rows {
        let stride = width.next_multiple_of(tile);
        let mut data = Aligned::zeroed(count * stride);
        let out = data.as_mut_slice();
        for k in 0..count {
            for r in 0..width {
                out[k * stride + r] = value(k, r);
            }
        }
        Rows {
            data,
            count,
            stride,
        }
    }
}

/// `acc[i][j] += a(i) * b[j]` for one step: `RJ` vectors of `b` against `RI` broadcast
/// scalars.
///
/// # Safety
/// The CPU runs `S`; `b` is readable for `RJ` vectors and every `a(i)` for one value.
#[inline(always)]
unsafe fn step<S: Lanes, const RI: usize, const RJ: usize>(
    acc: &mut [[S; RJ]; RI],
    b: *const f32,
    a: impl Fn(usize) -> *const f32,
) {
    unsafe {
        let mut v = [S::zero(); RJ];
        for (j, v) in v.iter_mut().enumerate() {
            *v = S::load(b.add(j * S::WIDTH));
        }
        // Indexed rather than zipped: `Zip::new` is not `#[inline]`, so in a build without
        // inlining across codegen units (`lto = "off"`) it stays a call in this innermost
        // loop, 6x the convolution's time.
        for (i, row) in acc.iter_mut().enumerate() {
            let w = S::splat(*a(i));
            for (j, acc) in row.iter_mut().enumerate() {
                *acc = w.mul_add(v[j], *acc);
            }
        }
    }
}

/// The accumulators of a tile: zero, or `RI` rows of `RJ` vectors of `out` (`stride` apart).
///
/// # Safety
/// With `load`, `out` is readable for the tile.
#[inline(always)]
unsafe fn start<S: Lanes, const RI: usize, const RJ: usize>(
    out: *const f32,
    stride: usize,
    load: bool,
) -> [[S; RJ]; RI] {
    unsafe {
        let mut acc = [[S::zero(); RJ]; RI];
        if load {
            for (i, row) in acc.iter_mut().enumerate() {
                for (j, acc) in row.iter_mut().enumerate() {
                    *acc = S::load(out.add(i * stride + j * S::WIDTH));
                }
            }
        }
        acc
    }
}

/// Writes a tile's accumulators to `RI` rows of `out`, `stride` apart.
///
/// # Safety
/// `out` is writable for the tile.
#[inline(always)]
unsafe fn finish<S: Lanes, const RI: usize, const RJ: usize>(
    acc: &[[S; RJ]; RI],
    out: *mut f32,
    stride: usize,
) {
    unsafe {
        for (i, row) in acc.iter().enumerate() {
            for (j, acc) in row.iter().enumerate() {
                acc.store(out.add(i * stride + j * S::WIDTH));
            }
        }
    }
}

/// The buffers of one correlation: `out[p, r] (+)= sum_k src[offsets[k] + p] * a[k, r]`
/// for `positions` positions (`out` rows `a.stride` long).
pub(super) struct CorrelationArgs<'a> {
    pub(super) a: &'a Rows,
    pub(super) offsets: &'a [usize],
    pub(super) src: &'a [f32],
    pub(super) out: &'a mut [f32],
    pub(super) positions: usize,
}

/// The correlation with tiles of `RI` positions by `RJ` vectors of rows.
///
/// # Safety
/// The CPU runs `S`; the bounds were checked by [`correlate`].
#[inline(always)]
unsafe fn correlate_with<S: Lanes, const RI: usize, const RJ: usize>(c: CorrelationArgs<'_>) {
    let (a, stride) = (c.a.data.as_slice().as_ptr(), c.a.stride);
    let (src, out) = (c.src.as_ptr(), c.out.as_mut_ptr());
    let taps_per_chunk = (CHUNK_ELEMENTS / stride).max(1);
    for (chunk, offsets) in c.offsets.chunks(taps_per_chunk).enumerate() {
        let first = chunk * taps_per_chunk;
        for r in (0..stride).step_by(RJ * S::WIDTH) {
            for p in (0..c.positions).step_by(RI) {
                unsafe {
                    let out = out.add(p * stride + r);
                    let mut acc = start::<S, RI, RJ>(out, stride, chunk > 0);
                    for (k, &offset) in offsets.iter().enumerate() {
                        let at = src.add(offset + p);
                        step(&mut acc, a.add((first + k) * stride + r), |i| at.add(i));
                    }
                    finish(&acc, out, stride);
                }
            }
        }
    }
}

/// The weight gradient's product, `out[k, r] += sum_p src[offsets[k] + p] * dy[p, r]`
/// (`dy` and `out` rows `stride` long, `offsets` a whole number of [`GRAD_TAPS`]).
pub(super) struct WeightGradArgs<'a> {
    pub(super) dy: &'a [f32],
    pub(super) stride: usize,
    pub(super) offsets: &'a [usize],
    pub(super) src: &'a [f32],
    pub(super) out: &'a mut [f32],
    pub(super) positions: usize,
}

/// The weight gradient's product with tiles of [`GRAD_TAPS`] taps by `RJ` vectors of rows.
///
/// # Safety
/// The CPU runs `S`; the bounds were checked by [`weight_grad`].
#[inline(always)]
unsafe fn weight_grad_with<S: Lanes, const RJ: usize>(g: WeightGradArgs<'_>) {
    let stride = g.stride;
    let (dy, src, out) = (g.dy.as_ptr(), g.src.as_ptr(), g.out.as_mut_ptr());
    let positions_per_chunk = (CHUNK_ELEMENTS / stride).max(1);
    for p0 in (0..g.positions).step_by(positions_per_chunk) {
        let p1 = (p0 + positions_per_chunk).min(g.positions);
        for r in (0..stride).step_by(RJ * S::WIDTH) {
            for (tile, taps) in g.offsets.chunks_exact(GRAD_TAPS).enumerate() {
                let taps: &[usize; GRAD_TAPS] = taps.try_into().expect("exact chunks");
                unsafe {
                    let out = out.add(tile * GRAD_TAPS * stride + r);
                    let mut acc = start::<S, GRAD_TAPS, RJ>(out, stride, true);
                    for p in p0..p1 {
                        let at = src.add(p);
                        step(&mut acc, dy.add(p * stride + r), |i| at.add(taps[i]));
                    }
                    finish(&acc, out, stride);
                }
            }
        }
    }
}

/// `#[target_feature]` entry points, one per instruction set and tile shape.
macro_rules! entry_points {
    ($($name:ident: $feature:literal, $kernel:ident::<$lanes:ty $(, $tile:literal)*>($args:ty);)*) => {
        $(
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = $feature)]
            unsafe fn $name(args: $args) {
                unsafe { $kernel::<$lanes $(, $tile)*>(args) }
            }
        )*
    };
}

entry_points! {
    correlate_avx512_wide: "avx512f", correlate_with::<F32x16, 6, 4>(CorrelationArgs<'_>);
    correlate_avx512_narrow: "avx512f", correlate_with::<F32x16, 12, 2>(CorrelationArgs<'_>);
    correlate_avx2_wide: "avx2,fma", correlate_with::<F32x8, 6, 2>(CorrelationArgs<'_>);
    correlate_avx2_narrow: "avx2,fma", correlate_with::<F32x8, 12, 1>(CorrelationArgs<'_>);
    weight_grad_avx512_wide: "avx512f", weight_grad_with::<F32x16, 4>(WeightGradArgs<'_>);
    weight_grad_avx512_narrow: "avx512f", weight_grad_with::<F32x16, 2>(WeightGradArgs<'_>);
    weight_grad_avx2_wide: "avx2,fma", weight_grad_with::<F32x8, 2>(WeightGradArgs<'_>);
    weight_grad_avx2_narrow: "avx2,fma", weight_grad_with::<F32x8, 1>(WeightGradArgs<'_>);
}

/// Register tiles of one instruction set: rows (output channels) per tile and positions
/// per correlation tile. "Wide" tiles cover 64 (AVX-512) or 16 (AVX2) rows; matrices with
/// at most half that many rows use "narrow" tiles instead of padding rows with zeros.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tiles {
    isa: Isa,
    wide: bool,
}

impl Tiles {
    pub(super) fn for_rows(isa: Isa, rows: usize) -> Tiles {
        let narrow = Tiles { isa, wide: false };
        Tiles {
            isa,
            wide: rows > narrow.rows(),
        }
    }

    /// Rows of one tile (row strides are a multiple).
    pub(super) fn rows(self) -> usize {
        match (self.isa, self.wide) {
            (Isa::Avx512, true) => 64,
            (Isa::Avx512, false) => 32,
            (Isa::Avx2, true) => 16,
            (Isa::Avx2, false) => 8,
        }
    }

    /// Positions of one correlation tile (position counts are a multiple).
    pub(super) fn positions(self) -> usize {
        if self.wide { 6 } else { 12 }
    }
}

/// Runs the correlation `c` with `tiles`.
pub(super) fn correlate(tiles: Tiles, c: CorrelationArgs<'_>) {
    let stride = c.a.stride;
    assert!(stride.is_multiple_of(tiles.rows()) && c.positions.is_multiple_of(tiles.positions()));
    assert_eq!(c.a.count, c.offsets.len());
    assert!(c.out.len() >= c.positions * stride);
    if let Some(furthest) = c.offsets.iter().max() {
        assert!(
            furthest + c.positions <= c.src.len(),
            "correlation reads past its source"
        );
    }
    // SAFETY: the checks above bound every access of the tiles; `tiles.isa` came from
    // `Isa::detect`/`Isa::available`, so the CPU runs it.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        match (tiles.isa, tiles.wide) {
            (Isa::Avx512, true) => correlate_avx512_wide(c),
            (Isa::Avx512, false) => correlate_avx512_narrow(c),
            (Isa::Avx2, true) => correlate_avx2_wide(c),
            (Isa::Avx2, false) => correlate_avx2_narrow(c),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!(
        "`Isa::detect` finds no instruction set off x86-64: {tiles:?}, {}",
        c.positions
    );
}

/// Runs the weight gradient's product `g` with `tiles`.
pub(super) fn weight_grad(tiles: Tiles, g: WeightGradArgs<'_>) {
    assert!(g.stride.is_multiple_of(tiles.rows()) && g.offsets.len().is_multiple_of(GRAD_TAPS));
    assert!(g.dy.len() >= g.positions * g.stride);
    assert!(g.out.len() >= g.offsets.len() * g.stride);
    if let Some(furthest) = g.offsets.iter().max() {
        assert!(
            furthest + g.positions <= g.src.len(),
            "weight gradient reads past its source"
        );
    }
    // SAFETY: as in `correlate`.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        match (tiles.isa, tiles.wide) {
            (Isa::Avx512, true) => weight_grad_avx512_wide(g),
            (Isa::Avx512, false) => weight_grad_avx512_narrow(g),
            (Isa::Avx2, true) => weight_grad_avx2_wide(g),
            (Isa::Avx2, false) => weight_grad_avx2_narrow(g),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!(
        "`Isa::detect` finds no instruction set off x86-64: {tiles:?}, {}",
        g.positions
    );
}
