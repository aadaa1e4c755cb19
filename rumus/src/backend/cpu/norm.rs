//! Layer normalisation of contiguous rows, forward and backward, one pass a row. Written as a
//! composite it is eight tensor ops (mean, subtract, square, mean, add, rsqrt, multiply and
//! the affine), each reading the rows again into a fresh buffer; its gradient is three
//! times that. Also the CPU's side of the [`Norm`] contract.

use std::borrow::Cow;

use rayon::prelude::*;

use super::backend::{Cpu, ensure_output};
use super::buffer::CpuBuffer;
use super::parallel::{PARALLEL_GRAIN, for_each_row, worth_splitting};
use super::strided::map;
use crate::backend::contract::{Norm, Src};
use crate::dtype::DType;
use crate::element::Float;
use crate::error::{Error, Result};

impl Norm for Cpu {
    fn layer_norm(
        &self,
        x: Src<'_, CpuBuffer>,
        weight: Option<Src<'_, CpuBuffer>>,
        bias: Option<Src<'_, CpuBuffer>>,
        eps: f64,
    ) -> Result<Option<(CpuBuffer, CpuBuffer)>> {
        if x.dtype() == DType::F64 {
            forward::<f64>(x, weight, bias, eps).map(Some)
        } else {
            forward::<f32>(x, weight, bias, eps).map(Some)
        }
    }

    fn layer_norm_backward(
        &self,
        grad: Src<'_, CpuBuffer>,
        x: Src<'_, CpuBuffer>,
        weight: Option<Src<'_, CpuBuffer>>,
        stats: Src<'_, CpuBuffer>,
        wanted: [bool; 3],
    ) -> Result<[Option<CpuBuffer>; 3]> {
        if x.dtype() == DType::F64 {
            backward::<f64>(grad, x, weight, stats, wanted)
        } else {
            backward::<f32>(grad, x, weight, stats, wanted)
        }
    }
}

/// The elements of float operand `x` (of element type `T`) in row-major order: borrowed
/// where the view is contiguous, else copied.
fn elements<T: Float>(x: Src<'_, CpuBuffer>) -> Result<Cow<'_, [T]>> {
    let all = T::slice(x.memory).ok_or(Error::DType {
        op: "layer_norm",
        expected: std::any::type_name::<T>(),
        found: x.dtype(),
    })?;
    if x.layout.is_contiguous() {
        let start = x.layout.offset();
        return Ok(Cow::Borrowed(&all[start..start + x.numel()]));
    }
    ensure_output("layer_norm", x.dims(), x.dtype())?;
    Ok(Cow::Owned(map(all, x.layout, |v| v)))
}

/// [`Norm::layer_norm`] of elements `T`: the values and the flat `[mean, rstd]` pairs.
fn forward<T: Float>(
    x: Src<'_, CpuBuffer>,
    weight: Option<Src<'_, CpuBuffer>>,
    bias: Option<Src<'_, CpuBuffer>>,
    eps: f64,
) -> Result<(CpuBuffer, CpuBuffer)> {
    let n = x.dims()[x.dims().len() - 1];
    let weight = weight.map(elements::<T>).transpose()?;
    let bias = bias.map(elements::<T>).transpose()?;
    let affine = Affine {
        weight: weight.as_deref(),
        bias: bias.as_deref(),
    };
    let (values, stats) = layer_norm_rows(&elements::<T>(x)?, n, affine, T::from_f64(eps));
    let flat: Vec<T> = stats.iter().flat_map(|s| [s.mean, s.rstd]).collect();
    Ok((T::into_buffer(values), T::into_buffer(flat)))
}

/// [`Norm::layer_norm_backward`] of elements `T`.
fn backward<T: Float>(
    grad: Src<'_, CpuBuffer>,
    x: Src<'_, CpuBuffer>,
    weight: Option<Src<'_, CpuBuffer>>,
    stats: Src<'_, CpuBuffer>,
    [want_x, want_w, want_b]: [bool; 3],
) -> Result<[Option<CpuBuffer>; 3]> {
    let stats: Vec<RowStats<T>> = elements::<T>(stats)?
        .chunks_exact(2)
        .map(|pair| RowStats {
            mean: pair[0],
            rstd: pair[1],
        })
        .collect();
    let weight = weight.map(elements::<T>).transpose()?;
    let (g, xs) = (elements::<T>(grad)?, elements::<T>(x)?);
    let gx =
        want_x.then(|| T::into_buffer(layer_norm_input_grad(&g, &xs, &stats, weight.as_deref())));
    let (gw, gb) = if want_w || want_b {
        let (gw, gb) = layer_norm_affine_grads(&g, &xs, &stats);
        (
            want_w.then(|| T::into_buffer(gw)),
            want_b.then(|| T::into_buffer(gb)),
        )
    } else {
        (None, None)
    };
    Ok([gx, gw, gb])
}

/// What the backward pass needs of each row: its mean and `1 / sqrt(var + eps)`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RowStats<T> {
    /// Mean of the row.
    pub mean: T,
    /// `1 / sqrt(var + eps)`, with the biased variance.
    pub rstd: T,
}

/// The per-row weight and bias of the affine after the normalisation (`[n]` each, PyTorch's
/// `elementwise_affine`), either of which may be absent.
#[derive(Debug, Clone, Copy)]
pub struct Affine<'a, T> {
    /// Scale multiplied into each normalised row, `[n]`; `None` means 1.
    pub weight: Option<&'a [T]>,
    /// Shift added after the scale, `[n]`; `None` means 0.
    pub bias: Option<&'a [T]>,
}

/// `sum(f(j))` for `j < n` in eight independent lanes, so the additions vectorise (one
/// accumulator would be a chain the compiler must keep in order).
#[inline]
fn lane_sum<T: Float>(n: usize, f: impl Fn(usize) -> T) -> T {
    let mut lanes = [T::ZERO; 8];
    let full = n - n % 8;
    for base in (0..full).step_by(8) {
        for (lane, acc) in lanes.iter_mut().enumerate() {
            *acc += f(base + lane);
        }
    }
    let mut total = lanes.iter().fold(T::ZERO, |a, &b| a + b);
    for j in full..n {
        total += f(j);
    }
    total
}

/// `f(row)` for each of `rows` rows of `n` elements, in parallel when the rows are worth it.
fn map_rows<R: Send>(rows: usize, n: usize, f: impl Fn(usize) -> R + Sync + Send) -> Vec<R> {
    if worth_splitting(rows * n) && rows > 1 {
        (0..rows).into_par_iter().map(f).collect()
    } else {
        (0..rows).map(f).collect()
    }
}

/// The mean and inverse standard deviation (biased variance, as PyTorch's) of one row.
fn row_stats<T: Float>(row: &[T], eps: T) -> RowStats<T> {
    let n = T::from_f64(row.len() as f64);
    let mean = lane_sum(row.len(), |j| row[j]) / n;
    let var = lane_sum(row.len(), |j| {
        let centered = row[j] - mean;
        centered * centered
    }) / n;
    RowStats {
        mean,
        rstd: T::ONE / (var + eps).sqrt(),
    }
}

/// `(x - mean) / sqrt(var + eps) * weight + bias` over each row of `n` elements of `x`;
/// returns the values and each row's statistics.
pub fn layer_norm_rows<T: Float>(
    x: &[T],
    n: usize,
    affine: Affine<'_, T>,
    eps: T,
) -> (Vec<T>, Vec<RowStats<T>>) {
    let rows = x.len().checked_div(n).unwrap_or(0);
    let stats = map_rows(rows, n, |r| row_stats(&x[r * n..(r + 1) * n], eps));
    // Every element is written: reused memory rather than fresh pages to fault in.
    let mut out = super::pool::reused(x.len(), T::ZERO);
    for_each_row(&mut out, n, |r, dst| {
        let src = &x[r * n..(r + 1) * n];
        let RowStats { mean, rstd } = stats[r];
        for (j, (d, &v)) in dst.iter_mut().zip(src).enumerate() {
            let mut y = (v - mean) * rstd;
            if let Some(w) = affine.weight {
                y *= w[j];
            }
            if let Some(b) = affine.bias {
                y += b[j];
            }
            *d = y;
        }
    });
    (out, stats)
}

/// The gradient of the input of [`layer_norm_rows`] given the output's `grad`:
/// `rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))` with `xhat` the normalised
/// input and `dxhat = grad * weight`.
pub fn layer_norm_input_grad<T: Float>(
    grad: &[T],
    x: &[T],
    stats: &[RowStats<T>],
    weight: Option<&[T]>,
) -> Vec<T> {
    let n = x.len().checked_div(stats.len()).unwrap_or(0);
    let count = T::from_f64(n as f64);
    let mut out = super::pool::reused(x.len(), T::ZERO);
    for_each_row(&mut out, n, |r, dst| {
        let (g, src) = (&grad[r * n..(r + 1) * n], &x[r * n..(r + 1) * n]);
        let RowStats { mean, rstd } = stats[r];
        let dxhat = |j: usize| weight.map_or(g[j], |w| g[j] * w[j]);
        let mean_dxhat = lane_sum(n, dxhat) / count;
        let mean_dxhat_xhat = lane_sum(n, |j| dxhat(j) * (src[j] - mean) * rstd) / count;
        for (j, d) in dst.iter_mut().enumerate() {
            let xhat = (src[j] - mean) * rstd;
            *d = rstd * (dxhat(j) - mean_dxhat - xhat * mean_dxhat_xhat);
        }
    });
    out
}

/// The gradients of the weight (`sum over rows of grad * xhat`) and of the bias (`sum over
/// rows of grad`), each `[n]`, from partial sums over blocks of rows added in block order.
///
/// The blocks are [`PARALLEL_GRAIN`] elements of rows whatever the thread count (one block
/// a thread made the sums, and so the trained weights, differ between one and two threads),
/// so the threads only decide which block is summed where, never how the sums round.
pub fn layer_norm_affine_grads<T: Float>(
    grad: &[T],
    x: &[T],
    stats: &[RowStats<T>],
) -> (Vec<T>, Vec<T>) {
    let rows = stats.len();
    let n = x.len().checked_div(rows).unwrap_or(0);
    let sums_over = |block: std::ops::Range<usize>| {
        let (mut gw, mut gb) = (vec![T::ZERO; n], vec![T::ZERO; n]);
        for r in block {
            let (g, src) = (&grad[r * n..(r + 1) * n], &x[r * n..(r + 1) * n]);
            let RowStats { mean, rstd } = stats[r];
            for j in 0..n {
                gw[j] += g[j] * (src[j] - mean) * rstd;
                gb[j] += g[j];
            }
        }
        (gw, gb)
    };
    let per_block = (PARALLEL_GRAIN / n.max(1)).max(1);
    let blocks = rows.div_ceil(per_block).max(1);
    let partials = map_rows(blocks, per_block * n, |b| {
        sums_over(b * per_block..((b + 1) * per_block).min(rows))
    });
    let add = |(mut w, mut b): (Vec<T>, Vec<T>), (w2, b2): (Vec<T>, Vec<T>)| {
        w.iter_mut().zip(w2).for_each(|(a, v)| *a += v);
        b.iter_mut().zip(b2).for_each(|(a, v)| *a += v);
        (w, b)
    };
    partials
        .into_iter()
        .reduce(add)
        .unwrap_or_else(|| (vec![T::ZERO; n], vec![T::ZERO; n]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The forward values against the definition computed in f64 with a two-pass variance.
    #[test]
    fn rows_match_the_definition() {
        let (rows, n) = (3, 37);
        let x: Vec<f32> = (0..rows * n)
            .map(|i| ((i * 7919) % 101) as f32 * 0.1 - 5.0)
            .collect();
        let w: Vec<f32> = (0..n).map(|j| 0.5 + j as f32 * 0.01).collect();
        let b: Vec<f32> = (0..n).map(|j| j as f32 * -0.02).collect();
        let affine = Affine {
            weight: Some(&w),
            bias: Some(&b),
        };
        let (out, stats) = layer_norm_rows(&x, n, affine, 1e-5);
        for r in 0..rows {
            let row: Vec<f64> = x[r * n..(r + 1) * n].iter().map(|&v| v as f64).collect();
            let mean = row.iter().sum::<f64>() / n as f64;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
            let rstd = 1.0 / (var + 1e-5).sqrt();
            assert!((stats[r].mean as f64 - mean).abs() < 1e-5);
            assert!((stats[r].rstd as f64 - rstd).abs() < 1e-4 * rstd);
            for j in 0..n {
                let expected = (row[j] - mean) * rstd * w[j] as f64 + b[j] as f64;
                assert!((out[r * n + j] as f64 - expected).abs() < 1e-4, "{r} {j}");
            }
        }
    }

    /// The affine gradients, sums over rows, round the same on any thread count.
    #[test]
    fn affine_grads_are_bit_identical_on_any_thread_count() {
        let (rows, n) = (100, 700);
        let value = |i: usize, k: usize| ((i * k) % 1009) as f32 / 1009.0 - 0.5;
        let x: Vec<f32> = (0..rows * n).map(|i| value(i, 7919)).collect();
        let grad: Vec<f32> = (0..rows * n).map(|i| value(i, 104_729)).collect();
        let stats = layer_norm_rows(
            &x,
            n,
            Affine {
                weight: None,
                bias: None,
            },
            1e-5,
        )
        .1;
        let on = |threads: usize| {
            let (w, b) = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap()
                .install(|| layer_norm_affine_grads(&grad, &x, &stats));
            w.iter()
                .chain(&b)
                .map(|v| v.to_bits())
                .collect::<Vec<u32>>()
        };
        let one = on(1);
        for threads in [2, 3, 4] {
            assert!(one == on(threads), "{threads} threads");
        }
    }
}
