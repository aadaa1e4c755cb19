//! Stride-1, undilated f32 convolution without im2col columns.
//!
//! Pad an input plane set once to `[C, Hp, Wp]` and number output positions as
//! `p = y * Wp + x`. Then every kernel tap `k = (c, i, j)` reads the padded input at
//! `offset(k) + p` with `offset(c, i, j) = c Hp Wp + i Wp + j`: the im2col column matrix is
//! the padded buffer itself, read through one offset per tap, and the convolution is
//! `out[p, r] = sum_k src[offset(k) + p] * a[k, r]` ("implicit GEMM"). The last `KW - 1`
//! positions of every row straddle two input rows; they are computed and dropped (for a 3x3
//! kernel over 28x28 planes with padding 1, 2 of every 30).
//!
//! The three products of a convolution's forward and backward all take this form:
//! - forward: `a` = the weight as `[C KH KW, OC]`, `src` = the input padded by `P`;
//! - input gradient: `a` = the weight flipped in space as `[OC KH KW, C]`, `src` = the
//!   output gradient padded by `K - 1 - P` (a "full" correlation);
//! - weight gradient: `dW[k, r] = sum_p src[offset(k) + p] * dy[p, r]`, the padded input
//!   against the output gradient (zero at dropped positions).
//!
//! Compared with im2col plus a general product this saves writing and re-reading the
//! `KH KW`-times larger column matrix, packing it, and folding columns back for the input
//! gradient.
//!
//! The register tiles are in the private `conv_tiles` module, the instruction sets in
//! [`simd`](super::simd).

use rayon::prelude::*;

use super::conv_tiles::{
    Aligned, CorrelationArgs, GRAD_TAPS, Rows, Tiles, WeightGradArgs, correlate, weight_grad,
};
use super::parallel::worth_splitting;
use super::pool;
use super::reduce::sum_slice;
use super::simd::Isa;
use super::transpose::{BLOCK, Strided, transpose};

/// A convolution the direct kernels run: an `[N, C, H, W]` input, an `[OC, C, KH, KW]`
/// weight, stride 1, no dilation, one group, and a padding of at most `K - 1` per side (so
/// the input gradient is a correlation of the output gradient padded by `K - 1 - P`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conv2dShape {
    /// Samples in the batch, `N`.
    pub batch: usize,
    /// Input channels, `C`.
    pub in_channels: usize,
    /// Size of one input plane, `[H, W]`.
    pub input: [usize; 2],
    /// Output channels, `OC`.
    pub out_channels: usize,
    /// Kernel size, `[KH, KW]`.
    pub kernel: [usize; 2],
    /// Zeros added on both sides of each spatial axis, `[PH, PW]`.
    pub padding: [usize; 2],
}

impl Conv2dShape {
    /// `[OH, OW]`; the caller checked that the kernel fits the padded input.
    pub fn output(&self) -> [usize; 2] {
        [0, 1].map(|a| self.input[a] + 2 * self.padding[a] + 1 - self.kernel[a])
    }

    /// Whether the direct kernels cover this geometry.
    pub fn supported(&self) -> bool {
        (0..2).all(|a| self.kernel[a] >= 1 && self.padding[a] < self.kernel[a])
    }

    /// The forward correlation (input padded by `P`).
    fn forward(&self) -> Correlation {
        Correlation {
            channels: self.in_channels,
            plane: [0, 1].map(|a| self.input[a] + 2 * self.padding[a]),
            kernel: self.kernel,
        }
    }

    /// Padding of the output gradient for the input gradient's correlation.
    fn transposed_padding(&self) -> [usize; 2] {
        [0, 1].map(|a| self.kernel[a] - 1 - self.padding[a])
    }
}

/// `channels` padded planes of `plane = [Hp, Wp]` correlated with a `kernel`-sized window
/// at stride 1.
#[derive(Debug, Clone, Copy)]
struct Correlation {
    channels: usize,
    plane: [usize; 2],
    kernel: [usize; 2],
}

impl Correlation {
    fn output(&self) -> [usize; 2] {
        [0, 1].map(|a| self.plane[a] + 1 - self.kernel[a])
    }

    fn taps(&self) -> usize {
        self.channels * self.kernel[0] * self.kernel[1]
    }

    /// Where tap `(c, i, j)` (row-major) reads, relative to the output position.
    fn offsets(&self) -> Vec<usize> {
        let [hp, wp] = self.plane;
        let mut offsets = Vec::with_capacity(self.taps());
        for c in 0..self.channels {
            for i in 0..self.kernel[0] {
                for j in 0..self.kernel[1] {
                    offsets.push(c * hp * wp + i * wp + j);
                }
            }
        }
        offsets
    }

    /// Positions computed per plane set: `OH * Wp` rounded up to whole tiles of `tile`.
    fn positions(&self, tile: usize) -> usize {
        (self.output()[0] * self.plane[1]).next_multiple_of(tile)
    }

    /// Length of a padded source: the planes plus the slack that `positions` computed
    /// positions read past them (`max offset + positions`).
    fn source_len(&self, positions: usize) -> usize {
        let [hp, wp] = self.plane;
        self.channels * hp * wp + positions - self.output()[0] * wp + self.kernel[1]
    }
}

/// Copies `channels` planes of `size` from `src` into `dst`, shifted by `pad = [top, left]`
/// into rows of `row` elements, planes `plane_stride` apart. The padding is left alone:
/// scratch buffers are zeroed once and every sample writes the same elements.
fn pad_into(
    dst: &mut [f32],
    src: &[f32],
    channels: usize,
    size: [usize; 2],
    pad: [usize; 2],
    row: usize,
    plane_stride: usize,
) {
    let [h, w] = size;
    for c in 0..channels {
        for y in 0..h {
            let from = (c * h + y) * w;
            let to = c * plane_stride + (y + pad[0]) * row + pad[1];
            dst[to..to + w].copy_from_slice(&src[from..from + w]);
        }
    }
}

/// The tiles' layout of one sample: position-major rows `stride` long, `channels` values
/// each, output row `y`'s `OW` positions starting at `y * row` (the positions between are
/// dropped).
struct PositionMajor {
    output: [usize; 2],
    row: usize,
    stride: usize,
    channels: usize,
}

impl PositionMajor {
    /// `(first channel, channels, output row)` of every piece to transpose: a block of
    /// channels through all output rows, then the next, so each side of the transpose
    /// streams through a few planes at a time instead of touching every plane per row.
    fn pieces(&self) -> impl Iterator<Item = (usize, usize, usize)> + use<> {
        let (channels, oh) = (self.channels, self.output[0]);
        (0..channels).step_by(BLOCK).flat_map(move |c| {
            let width = BLOCK.min(channels - c);
            (0..oh).map(move |y| (c, width, y))
        })
    }

    /// The `[channels, OH, OW]` planes of `tiles`, plus `bias[c]`.
    fn to_planes(&self, isa: Isa, tiles: &[f32], planes: &mut [f32], bias: Option<&[f32]>) {
        let [oh, ow] = self.output;
        for (c, width, y) in self.pieces() {
            let from = Strided {
                data: &tiles[y * self.row * self.stride + c..],
                stride: self.stride,
            };
            let to = Strided {
                data: &mut planes[c * oh * ow + y * ow..],
                stride: oh * ow,
            };
            transpose(Some(isa), from, to, [ow, width], bias.map(|b| &b[c..]));
        }
    }

    /// `[channels, OH, OW]` `planes` into the tiles' layout; dropped positions are left alone.
    fn fill_from_planes(&self, isa: Isa, planes: &[f32], tiles: &mut [f32]) {
        let [oh, ow] = self.output;
        for (c, width, y) in self.pieces() {
            let from = Strided {
                data: &planes[c * oh * ow + y * ow..],
                stride: oh * ow,
            };
            let to = Strided {
                data: &mut tiles[y * self.row * self.stride + c..],
                stride: self.stride,
            };
            transpose(Some(isa), from, to, [width, ow], None);
        }
    }
}

/// Per-thread buffers of one correlation over a batch.
struct Scratch {
    src: Vec<f32>,
    out: Aligned,
}

/// `batch` samples of `channels` planes of `size` each, to be padded by `pad`.
struct Source<'a> {
    data: &'a [f32],
    batch: usize,
    size: [usize; 2],
    pad: [usize; 2],
}

/// For every sample of `source`: its planes padded and correlated as `corr` with
/// `a[k, r] = weight(k, r)`; the valid positions (plus `bias[r]`) form the `[rows, OH, OW]`
/// result.
fn correlate_batch(
    isa: Isa,
    source: Source<'_>,
    corr: Correlation,
    rows: usize,
    weight: impl Fn(usize, usize) -> f32,
    bias: Option<&[f32]>,
) -> Vec<f32> {
    let tiles = Tiles::for_rows(isa, rows);
    let a = Rows::new(corr.taps(), rows, tiles.rows(), weight);
    let [oh, ow] = corr.output();
    let [hp, wp] = corr.plane;
    let Source {
        data: source,
        batch,
        size,
        pad,
    } = source;
    let (per_source, per_result) = (corr.channels * size[0] * size[1], rows * oh * ow);
    let mut result = pool::reused(batch * per_result, 0.0);
    if per_result == 0 {
        return result;
    }
    let positions = corr.positions(tiles.positions());
    let offsets = corr.offsets();
    let new_scratch = || Scratch {
        src: vec![0.0; corr.source_len(positions)],
        out: Aligned::zeroed(positions * a.stride),
    };
    let run = |scratch: &mut Scratch, n: usize, result: &mut [f32]| {
        let sample = &source[n * per_source..(n + 1) * per_source];
        pad_into(
            &mut scratch.src,
            sample,
            corr.channels,
            size,
            pad,
            wp,
            hp * wp,
        );
        let out = scratch.out.as_mut_slice();
        correlate(
            tiles,
            CorrelationArgs {
                a: &a,
                offsets: &offsets,
                src: &scratch.src,
                out,
                positions,
            },
        );
        let layout = PositionMajor {
            output: [oh, ow],
            row: wp,
            stride: a.stride,
            channels: rows,
        };
        layout.to_planes(isa, scratch.out.as_slice(), result, bias);
    };
    if batch > 1 && worth_splitting(batch * per_result * corr.taps()) {
        result
            .par_chunks_mut(per_result)
            .enumerate()
            .for_each_init(new_scratch, |scratch, (n, r)| run(scratch, n, r));
    } else {
        let mut scratch = new_scratch();
        for (n, r) in result.chunks_mut(per_result).enumerate() {
            run(&mut scratch, n, r);
        }
    }
    result
}

/// The forward convolution `[N, OC, OH, OW]` of `x` (`[N, C, H, W]`) with `w`
/// (`[OC, C, KH, KW]`), plus `bias` (`[OC]`) if given.
pub fn forward(
    isa: Isa,
    shape: &Conv2dShape,
    x: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
) -> Vec<f32> {
    let corr = shape.forward();
    let taps = corr.taps();
    let weight = |k: usize, r: usize| w[r * taps + k];
    let source = Source {
        data: x,
        batch: shape.batch,
        size: shape.input,
        pad: shape.padding,
    };
    correlate_batch(isa, source, corr, shape.out_channels, weight, bias)
}

/// The gradient `[N, C, H, W]` of the input of [`forward`] given `dy` (`[N, OC, OH, OW]`):
/// `dy` padded by `K - 1 - P` correlated with the weight flipped in space, channels swapped.
pub fn input_grad(isa: Isa, shape: &Conv2dShape, dy: &[f32], w: &[f32]) -> Vec<f32> {
    let [kh, kw] = shape.kernel;
    let c = shape.in_channels;
    let pad = shape.transposed_padding();
    let output = shape.output();
    let corr = Correlation {
        channels: shape.out_channels,
        plane: [0, 1].map(|a| output[a] + 2 * pad[a]),
        kernel: shape.kernel,
    };
    let weight = |k: usize, r: usize| {
        let (o, tap) = (k / (kh * kw), k % (kh * kw));
        let (i, j) = (tap / kw, tap % kw);
        w[((o * c + r) * kh + kh - 1 - i) * kw + kw - 1 - j]
    };
    let source = Source {
        data: dy,
        batch: shape.batch,
        size: output,
        pad,
    };
    correlate_batch(isa, source, corr, c, weight, None)
}

/// Partial sums the weight gradient's batch is cut into: enough for every thread of a
/// typical machine to take some, few enough that adding them up costs nothing next to the
/// products.
const WEIGHT_GRAD_GROUPS: usize = 16;

/// Per-thread buffers of the weight gradient: one sample padded, and its output gradient
/// position-major.
struct WeightGradScratch {
    src: Vec<f32>,
    dy: Aligned,
}

/// The gradient `[OC, C, KH, KW]` of the weight of [`forward`] given its input `x` and
/// `dy` (`[N, OC, OH, OW]`), summed over the batch.
pub fn weight_grad_of(isa: Isa, shape: &Conv2dShape, x: &[f32], dy: &[f32]) -> Vec<f32> {
    let corr = shape.forward();
    let (taps, oc) = (corr.taps(), shape.out_channels);
    let [oh, ow] = corr.output();
    let [hp, wp] = corr.plane;
    let tiles = Tiles::for_rows(isa, oc);
    let stride = oc.next_multiple_of(tiles.rows());
    let positions = oh * wp;
    let mut offsets = corr.offsets();
    // Extra taps read the first element; their sums are dropped.
    offsets.resize(taps.next_multiple_of(GRAD_TAPS), 0);
    if taps == 0 || oc == 0 {
        return vec![0.0; oc * taps];
    }
    let (per_x, per_dy) = (x.len() / shape.batch.max(1), oc * oh * ow);
    let new_scratch = || WeightGradScratch {
        src: vec![0.0; corr.source_len(positions)],
        dy: Aligned::zeroed(positions * stride),
    };
    // Adds sample `n`'s gradient to `sum`.
    let accumulate = |s: &mut WeightGradScratch, sum: &mut Aligned, n: usize| {
        let sample = &x[n * per_x..(n + 1) * per_x];
        let (c, size, pad) = (shape.in_channels, shape.input, shape.padding);
        pad_into(&mut s.src, sample, c, size, pad, wp, hp * wp);
        // The output gradient position-major; dropped positions stay zero.
        let grad = &dy[n * per_dy..(n + 1) * per_dy];
        let layout = PositionMajor {
            output: [oh, ow],
            row: wp,
            stride,
            channels: oc,
        };
        layout.fill_from_planes(isa, grad, s.dy.as_mut_slice());
        let args = WeightGradArgs {
            dy: s.dy.as_slice(),
            stride,
            offsets: &offsets,
            src: &s.src,
            out: sum.as_mut_slice(),
            positions,
        };
        weight_grad(tiles, args);
    };
    let add = |mut a: Aligned, b: Aligned| {
        let b = b.as_slice();
        a.as_mut_slice()
            .iter_mut()
            .zip(b)
            .for_each(|(a, b)| *a += b);
        a
    };
    // Fixed groups of consecutive samples, each summed in sample order, then the groups in
    // group order: the rounding depends on the batch alone. (Each thread summing whatever
    // samples rayon handed it made the gradient differ between runs and thread counts.)
    let per_group = shape.batch.div_ceil(WEIGHT_GRAD_GROUPS).max(1);
    let group = |scratch: &mut WeightGradScratch, g: usize| {
        let mut sum = Aligned::zeroed(offsets.len() * stride);
        let samples = g * per_group..((g + 1) * per_group).min(shape.batch);
        samples.for_each(|n| accumulate(scratch, &mut sum, n));
        sum
    };
    let groups = shape.batch.div_ceil(per_group);
    let sums: Vec<Aligned> = if groups > 1 && worth_splitting(shape.batch * per_dy * taps) {
        (0..groups)
            .into_par_iter()
            .map_init(new_scratch, group)
            .collect()
    } else {
        let mut scratch = new_scratch();
        (0..groups).map(|g| group(&mut scratch, g)).collect()
    };
    let total = sums
        .into_iter()
        .reduce(add)
        .unwrap_or_else(|| Aligned::zeroed(offsets.len() * stride));
    let total = total.as_slice();
    (0..oc)
        .flat_map(|r| (0..taps).map(move |k| total[k * stride + r]))
        .collect()
}

/// The gradient `[OC]` of the bias of [`forward`] given `dy` (`[N, OC, OH, OW]`): each
/// channel's sum over the batch and the positions, read plane by plane (a general reduction
/// over axes 0, 2 and 3 first copies `dy` into channel-major order).
pub fn bias_grad_of(shape: &Conv2dShape, dy: &[f32]) -> Vec<f32> {
    let [oh, ow] = shape.output();
    let (channels, plane) = (shape.out_channels, oh * ow);
    let channel = |c: usize| -> f32 {
        (0..shape.batch)
            .map(|n| sum_slice(&dy[(n * channels + c) * plane..][..plane]))
            .sum()
    };
    if worth_splitting(dy.len()) {
        (0..channels).into_par_iter().map(channel).collect()
    } else {
        (0..channels).map(channel).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Geometries covering odd sizes, channel counts that leave partial register tiles,
    /// rectangular kernels, every allowed padding, and matrices cut into several chunks.
    fn shapes() -> Vec<Conv2dShape> {
        let shape = |batch, in_channels, input, out_channels, kernel, padding| Conv2dShape {
            batch,
            in_channels,
            input,
            out_channels,
            kernel,
            padding,
        };
        vec![
            shape(2, 3, [7, 9], 5, [3, 3], [1, 1]),
            shape(1, 1, [5, 5], 1, [3, 3], [0, 0]),
            shape(3, 4, [6, 11], 7, [2, 3], [1, 2]),
            shape(2, 2, [4, 4], 9, [1, 1], [0, 0]),
            shape(1, 5, [9, 6], 3, [5, 5], [2, 4]),
            shape(40, 2, [3, 3], 2, [3, 3], [1, 1]),
            // Several tap chunks, position chunks and row tiles.
            shape(2, 16, [10, 12], 40, [3, 3], [1, 1]),
            shape(1, 12, [5, 7], 70, [3, 3], [1, 1]),
            // Empty channel sets: no taps, or no rows.
            shape(2, 0, [4, 4], 3, [3, 3], [1, 1]),
            shape(2, 3, [4, 4], 0, [3, 3], [1, 1]),
        ]
    }

    fn values(len: usize, seed: u64) -> Vec<f32> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    }

    /// Where in the input tap `(i, j)` of output position `(y, x)` of `plane` (sample and
    /// input channel) reads; `None` in the padding.
    fn input_index(s: &Conv2dShape, plane: usize, [y, x, i, j]: [usize; 4]) -> Option<usize> {
        let row = (y + i).checked_sub(s.padding[0])?;
        let col = (x + j).checked_sub(s.padding[1])?;
        let [h, w] = s.input;
        (row < h && col < w).then_some((plane * h + row) * w + col)
    }

    /// Every (sample, output channel, input channel, output position, tap) of the
    /// convolution, with the flat indices of the output, weight and input element.
    fn for_each_term(s: &Conv2dShape, mut f: impl FnMut(usize, usize, usize, [usize; 4])) {
        let [oh, ow] = s.output();
        let [kh, kw] = s.kernel;
        for n in 0..s.batch {
            for o in 0..s.out_channels {
                for c in 0..s.in_channels {
                    for y in 0..oh {
                        for xo in 0..ow {
                            for i in 0..kh {
                                for j in 0..kw {
                                    let out = ((n * s.out_channels + o) * oh + y) * ow + xo;
                                    let weight = ((o * s.in_channels + c) * kh + i) * kw + j;
                                    f(n * s.in_channels + c, out, weight, [y, xo, i, j]);
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    fn assert_close(found: &[f32], expected: &[f64], what: &str) {
        assert_eq!(found.len(), expected.len(), "{what}: length");
        for (i, (f, e)) in found.iter().zip(expected).enumerate() {
            assert!(
                (*f as f64 - e).abs() <= 1e-4 * (1.0 + e.abs()),
                "{what}[{i}]: {f} against {e}"
            );
        }
    }

    #[test]
    fn forward_and_gradients_match_the_definition() {
        for isa in Isa::available() {
            for s in shapes() {
                assert!(s.supported());
                let [oh, ow] = s.output();
                let [kh, kw] = s.kernel;
                let x = values(s.batch * s.in_channels * s.input[0] * s.input[1], 1);
                let w = values(s.out_channels * s.in_channels * kh * kw, 2);
                let b = values(s.out_channels, 3);
                let dy = values(s.batch * s.out_channels * oh * ow, 4);
                let mut y = vec![0.0f64; dy.len()];
                let mut dx = vec![0.0f64; x.len()];
                let mut dw = vec![0.0f64; w.len()];
                let mut db = vec![0.0f64; s.out_channels];
                for (i, g) in dy.iter().enumerate() {
                    db[i / (oh * ow) % s.out_channels] += *g as f64;
                }
                for (i, v) in y.iter_mut().enumerate() {
                    *v = b[i / (oh * ow) % s.out_channels] as f64;
                }
                for_each_term(&s, |plane, out, weight, pos| {
                    if let Some(at) = input_index(&s, plane, pos) {
                        y[out] += w[weight] as f64 * x[at] as f64;
                        dw[weight] += dy[out] as f64 * x[at] as f64;
                        dx[at] += dy[out] as f64 * w[weight] as f64;
                    }
                });
                let what = |part: &str| format!("{part} of {s:?} on {isa:?}");
                assert_close(&forward(isa, &s, &x, &w, Some(&b)), &y, &what("forward"));
                assert_close(&input_grad(isa, &s, &dy, &w), &dx, &what("input gradient"));
                assert_close(
                    &weight_grad_of(isa, &s, &x, &dy),
                    &dw,
                    &what("weight gradient"),
                );
                assert_close(&bias_grad_of(&s, &dy), &db, &what("bias gradient"));
            }
        }
    }

    /// The weight gradient, a sum over the batch, rounds the same on any thread count.
    #[test]
    fn weight_gradient_is_bit_identical_on_any_thread_count() {
        let s = Conv2dShape {
            batch: 37,
            in_channels: 3,
            input: [12, 12],
            out_channels: 8,
            kernel: [3, 3],
            padding: [1, 1],
        };
        let [oh, ow] = s.output();
        let x = values(s.batch * s.in_channels * 144, 5);
        let dy = values(s.batch * s.out_channels * oh * ow, 6);
        for isa in Isa::available() {
            let on = |threads: usize| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap()
                    .install(|| weight_grad_of(isa, &s, &x, &dy))
            };
            let one: Vec<u32> = on(1).iter().map(|v| v.to_bits()).collect();
            for threads in [2, 3, 2, 3] {
                let split: Vec<u32> = on(threads).iter().map(|v| v.to_bits()).collect();
                assert!(one == split, "{isa:?} on {threads} threads");
            }
        }
    }
}
