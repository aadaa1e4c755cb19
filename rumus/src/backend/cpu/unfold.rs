//! Sliding windows over the last two axes of contiguous `[planes, H, W]` buffers: `unfold`
//! (im2col) copies every window into columns and `fold` (col2im), its adjoint, sums columns
//! back into planes; `window_sum`/`window_spread` (another adjoint pair) and `window_argmax`
//! reduce each window in place, without materialising its columns, for pooling. Each plane
//! (one sample's channel) is independent, so planes are split across threads above the grain
//! size and no two threads ever write the same element. Per plane, columns are laid out
//! `[K, L]`: `K = KH * KW` taps (row-major in the kernel), `L = OH * OW` output positions.

use rayon::prelude::*;

use super::parallel::{PARALLEL_GRAIN, worth_splitting};
use crate::element::Float;

pub use crate::backend::kinds::Window2d;

/// Runs `f(plane, chunk)` for every `chunk_len`-sized chunk of `out` (one per plane),
/// splitting planes across threads when the work, `work_per_plane` element visits each, is
/// above the grain. (The work, not the output size, decides: global pooling writes one value
/// per plane but reads the whole plane.)
fn for_each_plane<O: Send>(
    out: &mut [O],
    chunk_len: usize,
    work_per_plane: usize,
    f: impl Fn(usize, &mut [O]) + Sync,
) {
    if chunk_len == 0 {
        return;
    }
    let planes = out.len() / chunk_len;
    let work = work_per_plane.max(chunk_len);
    if planes > 1 && worth_splitting(planes.saturating_mul(work)) {
        let per_task = (PARALLEL_GRAIN / work).max(1);
        out.par_chunks_mut(per_task * chunk_len)
            .enumerate()
            .for_each(|(task, chunk)| {
                for (i, plane) in chunk.chunks_mut(chunk_len).enumerate() {
                    f(task * per_task + i, plane);
                }
            });
    } else {
        for (i, plane) in out.chunks_mut(chunk_len).enumerate() {
            f(i, plane);
        }
    }
}

/// Along one axis, for tap `k`: the signed input offset of output position 0, and the range
/// `lo..hi` of output positions whose input coordinate `o * stride + offset` lies inside
/// `0..size`.
#[inline]
fn valid_range(
    k: usize,
    dilation: usize,
    padding: usize,
    stride: usize,
    size: usize,
    out: usize,
) -> (isize, usize, usize) {
    let offset = (k * dilation) as isize - padding as isize;
    // Smallest o with o * stride + offset >= 0.
    let lo = if offset >= 0 {
        0
    } else {
        ((-offset) as usize).div_ceil(stride)
    };
    // Smallest o with o * stride + offset >= size.
    let limit = size as isize - offset;
    let hi = if limit <= 0 {
        0
    } else {
        (limit as usize).div_ceil(stride)
    };
    (offset, lo.min(out), hi.min(out).max(lo.min(out)))
}

/// For output position `o` along one axis: the taps `lo..hi` whose input coordinate
/// `o * stride + k * dilation - padding` lies inside `0..size`, and the coordinate of tap 0
/// (possibly negative).
#[inline]
fn taps_inside(
    o: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    size: usize,
) -> (usize, usize, isize) {
    let start = (o * stride) as isize - padding as isize;
    // Smallest k with start + k * dilation >= 0.
    let lo = if start >= 0 {
        0
    } else {
        ((-start) as usize).div_ceil(dilation)
    };
    // Smallest k with start + k * dilation >= size.
    let limit = size as isize - start;
    let hi = if limit <= 0 {
        0
    } else {
        (limit as usize).div_ceil(dilation)
    };
    (lo.min(kernel), hi.min(kernel).max(lo.min(kernel)), start)
}

/// [`taps_inside`] for every output position along axis `a` of `w`.
fn taps_per_position(w: &Window2d, a: usize) -> Vec<(usize, usize, isize)> {
    (0..w.output()[a])
        .map(|o| {
            taps_inside(
                o,
                w.kernel[a],
                w.stride[a],
                w.padding[a],
                w.dilation[a],
                w.input[a],
            )
        })
        .collect()
}

/// Element visits per plane of a window reduction: every tap of every window, and at least
/// the plane itself.
fn work(w: &Window2d) -> usize {
    (w.taps() * w.positions()).max(w.input[0] * w.input[1])
}

/// Copies every window of `src` (`planes` contiguous `[H, W]` planes) into columns laid out
/// per plane as `[K, L]`; positions in the padding read zero.
pub fn unfold<T: Float>(src: &[T], planes: usize, w: &Window2d) -> Vec<T> {
    let [h, wd] = w.input;
    let [oh, ow] = w.output();
    let [kh, kw] = w.kernel;
    let positions = w.positions();
    let plane_out = w.taps() * positions;
    let mut out = super::pool::filled(planes * plane_out, T::ZERO);
    debug_assert_eq!(src.len(), planes * h * wd);
    let rows: Vec<(isize, usize, usize)> = (0..kh)
        .map(|ki| valid_range(ki, w.dilation[0], w.padding[0], w.stride[0], h, oh))
        .collect();
    let cols: Vec<(isize, usize, usize)> = (0..kw)
        .map(|kj| valid_range(kj, w.dilation[1], w.padding[1], w.stride[1], wd, ow))
        .collect();
    let (sh, sw) = (w.stride[0], w.stride[1]);
    for_each_plane(&mut out, plane_out, plane_out, |p, dst| {
        let plane = &src[p * h * wd..(p + 1) * h * wd];
        for (ki, &(row_offset, oy_lo, oy_hi)) in rows.iter().enumerate() {
            for (kj, &(col_offset, ox_lo, ox_hi)) in cols.iter().enumerate() {
                let tap = ki * kw + kj;
                for oy in oy_lo..oy_hi {
                    let iy = (oy * sh) as isize + row_offset;
                    let line = &plane[iy as usize * wd..(iy as usize + 1) * wd];
                    // First input column of the valid run.
                    let ix0 = ((ox_lo * sw) as isize + col_offset) as usize;
                    let run = &mut dst[tap * positions + oy * ow..][ox_lo..ox_hi];
                    if sw == 1 {
                        run.copy_from_slice(&line[ix0..ix0 + run.len()]);
                    } else {
                        for (i, d) in run.iter_mut().enumerate() {
                            *d = line[ix0 + i * sw];
                        }
                    }
                }
            }
        }
    });
    out
}

/// The adjoint of [`unfold`]: sums every column entry of `cols` (`[K, L]` per plane) into
/// the input position it was read from (entries read from the padding are dropped).
/// Returns `planes` `[H, W]` planes.
pub fn fold<T: Float>(cols: &[T], planes: usize, w: &Window2d) -> Vec<T> {
    let [h, wd] = w.input;
    let [oh, ow] = w.output();
    let [kh, kw] = w.kernel;
    let positions = w.positions();
    let plane_in = w.taps() * positions;
    let mut out = super::pool::filled(planes * h * wd, T::ZERO);
    debug_assert_eq!(cols.len(), planes * plane_in);
    let rows: Vec<(isize, usize, usize)> = (0..kh)
        .map(|ki| valid_range(ki, w.dilation[0], w.padding[0], w.stride[0], h, oh))
        .collect();
    let col_ranges: Vec<(isize, usize, usize)> = (0..kw)
        .map(|kj| valid_range(kj, w.dilation[1], w.padding[1], w.stride[1], wd, ow))
        .collect();
    let (sh, sw) = (w.stride[0], w.stride[1]);
    for_each_plane(&mut out, h * wd, plane_in, |p, plane| {
        let src = &cols[p * plane_in..(p + 1) * plane_in];
        for (ki, &(row_offset, oy_lo, oy_hi)) in rows.iter().enumerate() {
            for (kj, &(col_offset, ox_lo, ox_hi)) in col_ranges.iter().enumerate() {
                let tap = ki * kw + kj;
                for oy in oy_lo..oy_hi {
                    let iy = (oy * sh) as isize + row_offset;
                    let line = &mut plane[iy as usize * wd..(iy as usize + 1) * wd];
                    let ix0 = ((ox_lo * sw) as isize + col_offset) as usize;
                    let run = &src[tap * positions + oy * ow..][ox_lo..ox_hi];
                    if sw == 1 {
                        for (d, &s) in line[ix0..ix0 + run.len()].iter_mut().zip(run) {
                            *d += s;
                        }
                    } else {
                        for (i, &s) in run.iter().enumerate() {
                            line[ix0 + i * sw] += s;
                        }
                    }
                }
            }
        }
    });
    out
}

/// Sum of every window of `src` over the input elements it covers (padding adds nothing):
/// `[planes, OH * OW]`. Equal to `unfold` followed by a sum over the taps, without
/// materialising the columns.
pub fn window_sum<T: Float>(src: &[T], planes: usize, w: &Window2d) -> Vec<T> {
    let [h, wd] = w.input;
    let [_, ow] = w.output();
    let positions = w.positions();
    let (rows, cols) = (taps_per_position(w, 0), taps_per_position(w, 1));
    let (dh, dw) = (w.dilation[0], w.dilation[1]);
    let mut out = super::pool::filled(planes * positions, T::ZERO);
    for_each_plane(&mut out, positions, work(w), |p, dst| {
        let plane = &src[p * h * wd..(p + 1) * h * wd];
        for (oy, &(ki_lo, ki_hi, y0)) in rows.iter().enumerate() {
            for (ox, &(kj_lo, kj_hi, x0)) in cols.iter().enumerate() {
                let mut total = T::ZERO;
                if kj_lo < kj_hi {
                    let first = (x0 + (kj_lo * dw) as isize) as usize;
                    for ki in ki_lo..ki_hi {
                        let iy = (y0 + (ki * dh) as isize) as usize;
                        let line = &plane[iy * wd..(iy + 1) * wd];
                        if dw == 1 {
                            total += super::reduce::sum_slice(&line[first..first + kj_hi - kj_lo]);
                        } else {
                            for k in 0..kj_hi - kj_lo {
                                total += line[first + k * dw];
                            }
                        }
                    }
                }
                dst[oy * ow + ox] = total;
            }
        }
    });
    out
}

/// The adjoint of [`window_sum`]: adds each window's value of `grad` (`[planes, OH * OW]`)
/// to every input element the window covers. Returns `planes` `[H, W]` planes.
pub fn window_spread<T: Float>(grad: &[T], planes: usize, w: &Window2d) -> Vec<T> {
    let [h, wd] = w.input;
    let [_, ow] = w.output();
    let positions = w.positions();
    let (rows, cols) = (taps_per_position(w, 0), taps_per_position(w, 1));
    let (dh, dw) = (w.dilation[0], w.dilation[1]);
    let mut out = super::pool::filled(planes * h * wd, T::ZERO);
    for_each_plane(&mut out, h * wd, work(w), |p, plane| {
        let g = &grad[p * positions..(p + 1) * positions];
        for (oy, &(ki_lo, ki_hi, y0)) in rows.iter().enumerate() {
            for (ox, &(kj_lo, kj_hi, x0)) in cols.iter().enumerate() {
                let value = g[oy * ow + ox];
                let first = (x0 + (kj_lo * dw) as isize).max(0) as usize;
                for ki in ki_lo..ki_hi {
                    let iy = (y0 + (ki * dh) as isize) as usize;
                    let line = &mut plane[iy * wd..(iy + 1) * wd];
                    for k in 0..kj_hi - kj_lo {
                        line[first + k * dw] += value;
                    }
                }
            }
        }
    });
    out
}

/// For every window of `src`, the offset within its `[H, W]` plane of the window's maximum
/// (`iy * W + ix`): `[planes, OH * OW]`. As PyTorch's `max_pool2d`, the first maximum in
/// row-major window order wins ties, a NaN wins over numbers, and padding is never chosen
/// (the caller guarantees every window covers an input element).
pub fn window_argmax<T: Float>(src: &[T], planes: usize, w: &Window2d) -> Vec<i64> {
    let [h, wd] = w.input;
    let [_, ow] = w.output();
    let positions = w.positions();
    let (rows, cols) = (taps_per_position(w, 0), taps_per_position(w, 1));
    let (dh, dw) = (w.dilation[0], w.dilation[1]);
    let pairs = w.padding == [0, 0] && w.kernel == [2, 2];
    let mut out = vec![0i64; planes * positions];
    for_each_plane(&mut out, positions, work(w), |p, dst| {
        let plane = &src[p * h * wd..(p + 1) * h * wd];
        if pairs {
            argmax_2x2(plane, w, dst);
            return;
        }
        for (oy, &(ki_lo, ki_hi, y0)) in rows.iter().enumerate() {
            for (ox, &(kj_lo, kj_hi, x0)) in cols.iter().enumerate() {
                let first_x = (x0 + (kj_lo * dw) as isize).max(0) as usize;
                let first_y = (y0 + (ki_lo * dh) as isize).max(0) as usize;
                let mut best = T::NEG_INFINITY;
                let mut at = first_y * wd + first_x;
                for ki in ki_lo..ki_hi {
                    let row = (y0 + (ki * dh) as isize) as usize * wd;
                    for k in 0..kj_hi - kj_lo {
                        let index = row + first_x + k * dw;
                        let v = plane[index];
                        if v > best || v.is_nan() {
                            best = v;
                            at = index;
                        }
                    }
                }
                dst[oy * ow + ox] = at as i64;
            }
        }
    });
    out
}

/// Which of two offsets into `plane` wins: the later one when its value is larger or NaN.
/// Scanning a window in order with this rule keeps its first maximum, or its last NaN.
#[inline(always)]
fn later_wins<T: Float>(plane: &[T], earlier: usize, later: usize) -> usize {
    let (e, l) = (plane[earlier], plane[later]);
    // Random data takes about half of these: a select of offsets (values are read again
    // from them), which compiles to a conditional move rather than a branch.
    let take = (l > e) | l.is_nan();
    std::hint::select_unpredictable(take, later, earlier)
}

/// [`window_argmax`] of one plane for 2x2 windows that never reach into padding (the
/// usual `max_pool2d(2)`): each window as a tournament of two pairs, the pairs' winners
/// then played in order, which picks what an in-order scan picks. Scanning window by
/// window with branches took 7.5 ns an input element (mispredicted half the time and one
/// long dependency chain per window).
fn argmax_2x2<T: Float>(plane: &[T], w: &Window2d, dst: &mut [i64]) {
    let wd = w.input[1];
    let [oh, ow] = w.output();
    let (down, right) = (w.dilation[0] * wd, w.dilation[1]);
    for oy in 0..oh {
        for (ox, at) in dst[oy * ow..(oy + 1) * ow].iter_mut().enumerate() {
            let corner = oy * w.stride[0] * wd + ox * w.stride[1];
            let top = later_wins(plane, corner, corner + right);
            let bottom = later_wins(plane, corner + down, corner + down + right);
            *at = later_wins(plane, top, bottom) as i64;
        }
    }
}

/// `out[p, j] = src[p, offsets[p, j]]` for `planes` planes of `plane_len` elements and
/// `offsets` of `positions` entries per plane (each checked to lie inside its plane).
pub fn take_per_plane<T: Copy + Send + Sync + Default>(
    src: &[T],
    plane_len: usize,
    offsets: &[i64],
    positions: usize,
) -> Vec<T> {
    let mut out = vec![T::default(); offsets.len()];
    for_each_plane(&mut out, positions, positions, |p, dst| {
        let plane = &src[p * plane_len..(p + 1) * plane_len];
        for (d, &o) in dst.iter_mut().zip(&offsets[p * positions..]) {
            *d = plane[o as usize];
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[input, kernel, stride, padding, dilation]`.
    const GEOMETRIES: [[[usize; 2]; 5]; 8] = [
        [[5, 6], [3, 2], [1, 1], [0, 0], [1, 1]],
        [[5, 6], [3, 3], [2, 3], [1, 1], [1, 1]],
        [[7, 5], [2, 3], [2, 1], [2, 1], [2, 2]],
        [[4, 4], [4, 4], [1, 1], [0, 0], [1, 1]],
        [[3, 3], [2, 2], [3, 3], [2, 2], [1, 1]],
        [[6, 7], [3, 3], [1, 2], [1, 1], [2, 3]],
        [[6, 7], [2, 2], [2, 2], [0, 0], [1, 1]],
        [[7, 9], [2, 2], [1, 2], [0, 0], [2, 1]],
    ];

    fn windows() -> impl Iterator<Item = Window2d> {
        GEOMETRIES
            .into_iter()
            .map(|[input, kernel, stride, padding, dilation]| Window2d {
                input,
                kernel,
                stride,
                padding,
                dilation,
            })
    }

    fn values(n: usize, scale: f64) -> Vec<f64> {
        (0..n).map(|i| (i as f64 * scale).sin()).collect()
    }

    fn dot(a: &[f64], b: &[f64]) -> f64 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    /// Every window's taps computed the slow way: `[planes, K, L]`, `None` in the padding.
    fn naive_columns(src: &[f64], planes: usize, w: &Window2d) -> Vec<Option<(usize, f64)>> {
        let [h, wd] = w.input;
        let [oh, ow] = w.output();
        let (taps, positions) = (w.taps(), w.positions());
        let mut out = vec![None; planes * taps * positions];
        for p in 0..planes {
            for ki in 0..w.kernel[0] {
                for kj in 0..w.kernel[1] {
                    for oy in 0..oh {
                        for ox in 0..ow {
                            let iy = (oy * w.stride[0] + ki * w.dilation[0]) as isize
                                - w.padding[0] as isize;
                            let ix = (ox * w.stride[1] + kj * w.dilation[1]) as isize
                                - w.padding[1] as isize;
                            let inside =
                                iy >= 0 && ix >= 0 && (iy as usize) < h && (ix as usize) < wd;
                            let (tap, pos) = (ki * w.kernel[1] + kj, oy * ow + ox);
                            out[(p * taps + tap) * positions + pos] = inside.then(|| {
                                let offset = iy as usize * wd + ix as usize;
                                (offset, src[p * h * wd + offset])
                            });
                        }
                    }
                }
            }
        }
        out
    }

    #[test]
    fn unfold_matches_naive_and_fold_is_its_adjoint() {
        let planes = 2;
        for w in windows() {
            let src = values(planes * w.input[0] * w.input[1], 0.37);
            let cols = unfold(&src, planes, &w);
            let expected: Vec<f64> = naive_columns(&src, planes, &w)
                .into_iter()
                .map(|e| e.map_or(0.0, |(_, v)| v))
                .collect();
            assert_eq!(cols, expected, "{w:?}");
            let y = values(cols.len(), 0.11);
            let (lhs, rhs) = (dot(&cols, &y), dot(&src, &fold(&y, planes, &w)));
            assert!((lhs - rhs).abs() < 1e-9, "{w:?}: {lhs} vs {rhs}");
        }
    }

    #[test]
    fn window_reductions_match_the_columns() {
        let planes = 3;
        for w in windows() {
            let src = values(planes * w.input[0] * w.input[1], 0.73);
            let columns = naive_columns(&src, planes, &w);
            let (taps, positions) = (w.taps(), w.positions());
            let columns = &columns;
            let window = |p: usize, pos: usize| {
                (0..taps).filter_map(move |t| columns[(p * taps + t) * positions + pos])
            };
            let sums = window_sum(&src, planes, &w);
            let argmax = window_argmax(&src, planes, &w);
            for p in 0..planes {
                for pos in 0..positions {
                    let expected: f64 = window(p, pos).map(|(_, v)| v).sum();
                    assert!(
                        (sums[p * positions + pos] - expected).abs() < 1e-12,
                        "{w:?}"
                    );
                    // Windows wholly in the padding (some geometries here have them; pooling
                    // refuses them) have no maximum.
                    if let Some((offset, _)) =
                        window(p, pos).reduce(|best, e| if e.1 > best.1 { e } else { best })
                    {
                        assert_eq!(argmax[p * positions + pos], offset as i64, "{w:?}");
                    }
                }
            }
            // window_spread is the adjoint of window_sum.
            let y = values(sums.len(), 0.29);
            let (lhs, rhs) = (dot(&sums, &y), dot(&src, &window_spread(&y, planes, &w)));
            assert!((lhs - rhs).abs() < 1e-9, "{w:?}: {lhs} vs {rhs}");
        }
    }

    #[test]
    fn window_argmax_takes_the_first_maximum_and_nan() {
        let w = Window2d {
            input: [2, 3],
            kernel: [2, 2],
            stride: [1, 1],
            padding: [0, 0],
            dilation: [1, 1],
        };
        let ties = [1.0, 5.0, 5.0, 5.0, 2.0, 5.0];
        assert_eq!(window_argmax(&ties, 1, &w), vec![1, 1]);
        let nan = [1.0, f64::NAN, 7.0, 0.0, 2.0, 3.0];
        assert_eq!(window_argmax(&nan, 1, &w), vec![1, 1]);
        // Two NaNs in one window: the later one, as PyTorch's scan takes it.
        let two_nans = [f64::NAN, 1.0, 9.0, f64::NAN, 0.0, 9.0];
        assert_eq!(window_argmax(&two_nans, 1, &w), vec![3, 2]);
        let all_negative_infinity = [f64::NEG_INFINITY; 6];
        assert_eq!(window_argmax(&all_negative_infinity, 1, &w), vec![0, 1]);
    }

    /// Above the grain the planes are split across threads; each plane must come out as
    /// when it is computed alone (sequentially).
    #[test]
    fn threaded_planes_match_planes_computed_alone() {
        let w = Window2d {
            input: [16, 15],
            kernel: [3, 3],
            stride: [2, 1],
            padding: [1, 1],
            dilation: [1, 1],
        };
        let planes = 64;
        let plane = 16 * 15;
        assert!(planes * w.taps() * w.positions() > PARALLEL_GRAIN);
        let src = values(planes * plane, 0.37);
        let cols = unfold(&src, planes, &w);
        let folded = fold(&cols, planes, &w);
        let sums = window_sum(&src, planes, &w);
        let spread = window_spread(&sums, planes, &w);
        let argmax = window_argmax(&src, planes, &w);
        let maxima = take_per_plane(&src, plane, &argmax, w.positions());
        let (k, l) = (w.taps() * w.positions(), w.positions());
        for p in 0..planes {
            let one = &src[p * plane..(p + 1) * plane];
            assert_eq!(unfold(one, 1, &w), cols[p * k..(p + 1) * k]);
            let one_cols = &cols[p * k..(p + 1) * k];
            assert_eq!(fold(one_cols, 1, &w), folded[p * plane..(p + 1) * plane]);
            assert_eq!(window_sum(one, 1, &w), sums[p * l..(p + 1) * l]);
            let one_sums = &sums[p * l..(p + 1) * l];
            assert_eq!(
                window_spread(one_sums, 1, &w),
                spread[p * plane..(p + 1) * plane]
            );
            let one_argmax = window_argmax(one, 1, &w);
            assert_eq!(one_argmax, argmax[p * l..(p + 1) * l]);
            assert_eq!(
                take_per_plane(one, plane, &one_argmax, l),
                maxima[p * l..(p + 1) * l]
            );
        }
    }
}
