//! Depthwise convolution (one filter per channel, as MobileNet's and EfficientNet's blocks
//! use) computed directly: each output plane is the bias plus, tap by tap, one weight times a
//! shifted (and, with a stride, strided) view of the zero-padded input plane, one long loop
//! per tap that the compiler vectorises (compiled per instruction set by [`widest_isa!`]). The general path unfolds the
//! input into `K` times its size and runs one tiny product per channel, 8-14x slower.
//!
//! Inference only: the op takes this path when no gradient is recorded, so training keeps the
//! general path and its backward.

use super::parallel::{PARALLEL_GRAIN, for_each_row};
use super::simd::widest_isa;
use crate::backend::kinds::Window2d;
use crate::element::Float;

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
    let taps = window.taps();
    let plane_len = (oh * ow).max(1);
    // Planes per task, sharing one scratch (padded plane and extended output).
    let per_task = (PARALLEL_GRAIN / plane_len).max(1);
    for_each_row(&mut out, per_task * plane_len, |task, dst| {
        let (mut padded, mut extended) = (Vec::new(), Vec::new());
        for (k, plane_out) in dst.chunks_exact_mut(plane_len).enumerate() {
            let plane = task * per_task + k;
            let c = plane % channels;
            let filter = &weight[c * taps..(c + 1) * taps];
            let bias = bias.map_or(T::ZERO, |b| b[c]);
            let input = &x[plane * h * w..(plane + 1) * h * w];
            let scratch = (&mut padded, &mut extended);
            convolve_plane::<T>(input, filter, bias, window, plane_out, scratch);
        }
    });
    out
}

/// A plane's scratch: the zero-padded input and the extended output.
type Scratch<'a, T> = (&'a mut Vec<T>, &'a mut Vec<T>);

#[inline(always)]
fn convolve_plane_plain<T: Float>(
    input: &[T],
    filter: &[T],
    bias: T,
    window: &Window2d,
    dst: &mut [T],
    (padded, out): Scratch<'_, T>,
) {
    let ([_, w], [kh, kw], [oh, ow]) = (window.input, window.kernel, window.output());
    let ([sy, sx], [py, px], [dy, dx]) = (window.stride, window.padding, window.dilation);
    // The plane zero-padded, `padded_width` a multiple of `sx`; output position (oy, ox) is
    // flat position `m = oy * row + ox` of an extended output whose rows are `row` long, and
    // reads padded element `sx * m + i * dy * padded_width + j * dx` under tap (i, j). So
    // each tap is one long loop over the extended output (its extra columns are discarded),
    // however short the rows are.
    let padded_width = (w + 2 * px).next_multiple_of(sx);
    let row = sy * padded_width / sx;
    let extended = oh * row;
    let reach = (kh - 1) * dy * padded_width + (kw - 1) * dx;
    padded.clear();
    padded.resize(sx * extended + reach, T::ZERO);
    for (r, source) in input.chunks_exact(w).enumerate() {
        let start = (py + r) * padded_width + px;
        if let Some(target) = padded.get_mut(start..start + w) {
            target.copy_from_slice(source);
        }
    }
    let offsets: Vec<usize> = (0..kh)
        .flat_map(|i| (0..kw).map(move |j| i * dy * padded_width + j * dx))
        .collect();
    out.clear();
    out.resize(extended, bias);
    // Blocks of outputs summed over every tap in registers, stored once.
    for (b, block) in out.chunks_mut(BLOCK).enumerate() {
        let reads = &padded[b * BLOCK * sx..];
        let Ok(full) = <&mut [T; BLOCK]>::try_from(&mut *block) else {
            sum_any(block, reads, sx, filter, &offsets);
            continue;
        };
        match sx {
            1 => sum_block::<T, 1>(full, reads, filter, &offsets),
            2 => sum_block::<T, 2>(full, reads, filter, &offsets),
            _ => sum_any(full, reads, sx, filter, &offsets),
        }
    }
    for (target, source) in dst.chunks_exact_mut(ow).zip(out.chunks(row)) {
        target.copy_from_slice(&source[..ow]);
    }
}

/// Outputs per block of [`sum_block`]: four AVX2 registers.
const BLOCK: usize = 32;

/// `block[m] += Σ_t filter[t] * padded[S * m + offsets[t]]`, the block in registers.
#[inline(always)]
fn sum_block<T: Float, const S: usize>(
    block: &mut [T; BLOCK],
    padded: &[T],
    filter: &[T],
    offsets: &[usize],
) {
    let mut acc = *block;
    for (&tap, &offset) in filter.iter().zip(offsets) {
        // (the padded plane reaches every tap of every block)
        let reads = &padded[offset..offset + BLOCK * S];
        for (m, a) in acc.iter_mut().enumerate() {
            *a += tap * reads[S * m];
        }
    }
    *block = acc;
}

/// [`sum_block`] for any stride and block length.
#[inline(always)]
fn sum_any<T: Float>(
    block: &mut [T],
    padded: &[T],
    stride: usize,
    filter: &[T],
    offsets: &[usize],
) {
    for (&tap, &offset) in filter.iter().zip(offsets) {
        for (o, &v) in block
            .iter_mut()
            .zip(padded[offset..].iter().step_by(stride))
        {
            *o += tap * v;
        }
    }
}

widest_isa! {
    /// One output plane of the depthwise convolution.
    fn convolve_plane<T: Float>(
        input: &[T],
        filter: &[T],
        bias: T,
        window: &Window2d,
        dst: &mut [T],
        scratch: Scratch<'_, T>,
    ) => convolve_plane_plain
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

    #[test]
    fn the_op_without_gradients_agrees_with_the_general_path() {
        use crate::dtype::DType;
        use crate::tensor::DynTensor;
        for (dtype, stride, bias) in [(DType::F32, 1, true), (DType::F64, 2, false)] {
            let x = DynTensor::randn(&[2, 6, 11, 10], dtype).unwrap();
            let weight = DynTensor::randn(&[6, 1, 3, 3], dtype).unwrap();
            let b = DynTensor::randn(&[6], dtype).unwrap();
            let conv = |x: &DynTensor| {
                let bias = bias.then_some(&b);
                x.conv2d(&weight, bias, (stride, stride), (1, 1), (1, 1), 6)
                    .unwrap()
            };
            // Recorded for a backward pass: the general path.
            let general = conv(&x.detach().requires_grad_().unwrap());
            assert!(general.requires_grad());
            let direct = {
                let _guard = crate::no_grad();
                conv(&x)
            };
            assert_eq!(direct.dims(), general.dims());
            for (a, e) in direct.to_f64_vec().iter().zip(general.to_f64_vec()) {
                assert!(
                    (a - e).abs() <= 1e-5 * (1.0 + e.abs()),
                    "{dtype}: {a} against {e}"
                );
            }
        }
    }
}
