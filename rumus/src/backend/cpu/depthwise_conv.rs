//! Depthwise convolution (one filter per channel, as MobileNet's and EfficientNet's blocks
//! use) computed directly, eight channels at a time: the planes of eight channels are
//! interleaved into one zero-padded `[Hp, Wp, 8]` block, so each output position is the
//! biases plus, tap by tap, eight weights times eight inputs, one vector operation whatever
//! the stride or plane size (the loops are compiled per instruction set by [`widest_isa!`]).
//! The general path unfolds the input into `K` times its size and runs one tiny product per
//! channel, 8-14x slower.
//!
//! Inference only: the op takes this path when no gradient is recorded, so training keeps the
//! general path and its backward.

use super::parallel::{PARALLEL_GRAIN, for_each_row};
use super::simd::widest_isa;
use crate::backend::kinds::Window2d;
use crate::element::Float;

/// Planes convolved together, one per vector lane.
const LANES: usize = 8;

/// The output `[N, C, OH, OW]` of `x` (`[N, C, H, W]`, contiguous) convolved with one
/// `[KH, KW]` filter per channel (`weight` `[C, 1, KH, KW]`) over `window`, plus `bias`
/// (`[C]`).
pub(super) fn forward<T: Float + Default>(
    x: &[T],
    weight: &[T],
    bias: Option<&[T]>,
    channels: usize,
    window: &Window2d,
) -> Vec<T> {
    let [h, w] = window.input;
    let [oh, ow] = window.output();
    let planes = x.len() / (h * w).max(1);
    let mut out = super::pool::reused(planes * oh * ow, T::ZERO);
    let plane_len = (oh * ow).max(1);
    // Groups of eight planes per task (any eight: each lane has its own filter), sharing
    // one scratch; a task is about PARALLEL_GRAIN multiply-adds, so small planes under a
    // large filter still spread over the threads.
    let group_work = LANES * plane_len * window.taps();
    let groups_per_task = (PARALLEL_GRAIN / group_work.max(1)).max(1);
    for_each_row(
        &mut out,
        groups_per_task * LANES * plane_len,
        |task, dst| {
            let mut scratch = Scratch::default();
            for (g, group_out) in dst.chunks_mut(LANES * plane_len).enumerate() {
                let first = (task * groups_per_task + g) * LANES;
                let lanes = group_out.len() / plane_len;
                let group = Group {
                    input: &x[first * h * w..(first + lanes) * h * w],
                    weight,
                    bias,
                    channels,
                    first,
                };
                convolve_group::<T>(&group, window, group_out, &mut scratch);
            }
        },
    );
    out
}

/// Up to eight consecutive planes of the input and where their filters are.
struct Group<'a, T> {
    /// The planes, one after another.
    input: &'a [T],
    weight: &'a [T],
    bias: Option<&'a [T]>,
    channels: usize,
    /// The index of the first plane (its channel is `first % channels`).
    first: usize,
}

/// A task's reused buffers: the interleaved padded planes, filters and outputs.
#[derive(Default)]
struct Scratch<T> {
    padded: Vec<[T; LANES]>,
    filters: Vec<[T; LANES]>,
    out: Vec<[T; LANES]>,
}

#[inline(always)]
fn convolve_group_plain<T: Float>(
    group: &Group<'_, T>,
    window: &Window2d,
    dst: &mut [T],
    scratch: &mut Scratch<T>,
) {
    let ([h, w], [kh, kw], [oh, ow]) = (window.input, window.kernel, window.output());
    let ([sy, sx], [py, px], [dy, dx]) = (window.stride, window.padding, window.dilation);
    let (plane, taps) = (h * w, kh * kw);
    if plane == 0 || oh * ow == 0 {
        return;
    }
    let lanes = group.input.len() / plane;
    let padded_width = w + 2 * px;
    let zero = [T::ZERO; LANES];
    // Interleave: padded[(r, c)][lane] (missing lanes and the border stay zero).
    scratch.padded.clear();
    scratch.padded.resize((h + 2 * py) * padded_width, zero);
    for (lane, source) in group.input.chunks_exact(plane).enumerate() {
        for (r, row) in source.chunks_exact(w).enumerate() {
            let start = (py + r) * padded_width + px;
            for (target, &v) in scratch.padded[start..start + w].iter_mut().zip(row) {
                target[lane] = v;
            }
        }
    }
    scratch.filters.clear();
    scratch.filters.resize(taps, zero);
    let mut biases = zero;
    for lane in 0..lanes {
        let c = (group.first + lane) % group.channels;
        for (tap, filter) in scratch.filters.iter_mut().enumerate() {
            filter[lane] = group.weight[c * taps + tap];
        }
        biases[lane] = group.bias.map_or(T::ZERO, |b| b[c]);
    }
    let offsets: Vec<usize> = (0..kh)
        .flat_map(|i| (0..kw).map(move |j| i * dy * padded_width + j * dx))
        .collect();
    scratch.out.clear();
    scratch.out.resize(oh * ow, zero);
    // Four neighbouring outputs at a time share each filter load; the rest one by one.
    for oy in 0..oh {
        let row = oy * sy * padded_width;
        let mut ox = 0;
        while ox + BLOCK <= ow {
            let acc = sum_taps::<T, BLOCK>(scratch, &offsets, biases, row + ox * sx, sx);
            scratch.out[oy * ow + ox..oy * ow + ox + BLOCK].copy_from_slice(&acc);
            ox += BLOCK;
        }
        for ox in ox..ow {
            let [acc] = sum_taps::<T, 1>(scratch, &offsets, biases, row + ox * sx, sx);
            scratch.out[oy * ow + ox] = acc;
        }
    }
    // De-interleave into the planes' outputs.
    for (lane, target) in dst.chunks_exact_mut(oh * ow).enumerate() {
        for (t, values) in target.iter_mut().zip(&scratch.out) {
            *t = values[lane];
        }
    }
}

/// Output positions per step of the group loop.
const BLOCK: usize = 4;

/// `N` neighbouring outputs (`stride` apart in the padded block, from `base`): the biases
/// plus every tap's filter times its inputs, eight lanes each.
#[inline(always)]
fn sum_taps<T: Float, const N: usize>(
    scratch: &Scratch<T>,
    offsets: &[usize],
    biases: [T; LANES],
    base: usize,
    stride: usize,
) -> [[T; LANES]; N] {
    let mut acc = [biases; N];
    for (filter, &offset) in scratch.filters.iter().zip(offsets) {
        for (b, a) in acc.iter_mut().enumerate() {
            let input = &scratch.padded[base + offset + b * stride];
            for lane in 0..LANES {
                a[lane] += filter[lane] * input[lane];
            }
        }
    }
    acc
}

widest_isa! {
    /// Up to eight output planes of the depthwise convolution.
    fn convolve_group<T: Float>(
        group: &Group<'_, T>,
        window: &Window2d,
        dst: &mut [T],
        scratch: &mut Scratch<T>,
    ) => convolve_group_plain
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The convolution summed in f64, position by position, from its definition.
    fn naive(x: &[f32], weight: &[f32], bias: &[f32], channels: usize, w: &Window2d) -> Vec<f64> {
        let ([h, wd], [kh, kw], [oh, ow]) = (w.input, w.kernel, w.output());
        let planes = x.len() / (h * wd);
        let mut out = Vec::new();
        for plane in 0..planes {
            let c = plane % channels;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut sum = bias[c] as f64;
                    for i in 0..kh {
                        for j in 0..kw {
                            let iy = (oy * w.stride[0] + i * w.dilation[0]) as isize
                                - w.padding[0] as isize;
                            let ix = (ox * w.stride[1] + j * w.dilation[1]) as isize
                                - w.padding[1] as isize;
                            if (0..h as isize).contains(&iy) && (0..wd as isize).contains(&ix) {
                                let v = x[plane * h * wd + iy as usize * wd + ix as usize];
                                sum += weight[c * kh * kw + i * kw + j] as f64 * v as f64;
                            }
                        }
                    }
                    out.push(sum);
                }
            }
        }
        out
    }

    #[test]
    fn every_window_gives_the_sum_of_its_definition() {
        // (input, kernel, stride, padding, dilation)
        let cases = [
            ([7, 9], [3, 3], [1, 1], [1, 1], [1, 1]),
            ([8, 8], [5, 5], [2, 2], [2, 2], [1, 1]),
            ([9, 7], [3, 5], [2, 1], [0, 2], [1, 1]),
            ([10, 11], [3, 3], [1, 2], [2, 2], [2, 2]),
            ([3, 3], [3, 3], [3, 3], [1, 1], [1, 1]),
            ([5, 40], [7, 7], [1, 1], [3, 3], [1, 1]),
        ];
        let channels = 3;
        for (input, kernel, stride, padding, dilation) in cases {
            let window = Window2d {
                input,
                kernel,
                stride,
                padding,
                dilation,
            };
            let numel = 2 * channels * input[0] * input[1];
            let x: Vec<f32> = (0..numel)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
                .collect();
            let weight: Vec<f32> = (0..channels * kernel[0] * kernel[1])
                .map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0)
                .collect();
            let bias = [0.5f32, -1.0, 2.0];
            let expected = naive(&x, &weight, &bias, channels, &window);
            let actual = forward(&x, &weight, Some(&bias), channels, &window);
            assert_eq!(actual.len(), expected.len(), "{window:?}");
            for (k, (&a, &e)) in actual.iter().zip(&expected).enumerate() {
                assert!(
                    (a as f64 - e).abs() <= 1e-5 * (1.0 + e.abs()),
                    "{window:?} at {k}: {a} against {e}"
                );
            }
        }
    }
}
