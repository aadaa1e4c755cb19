//! Reductions over any set of axes. The reduced axes are moved last (a view), the view is
//! made contiguous if it is not already, and each output element then reduces one contiguous
//! run, which keeps the inner loop simple and vectorisable. Also the CPU's side of the
//! [`Reduce`] contract.

use std::borrow::Cow;

use rayon::prelude::*;

use super::backend::{Cpu, ensure_output};
use super::buffer::{CpuBuffer, map_buffer, with_float};
use super::parallel::{PARALLEL_GRAIN, for_each_row, worth_splitting};
use super::strided::map;
use crate::backend::contract::{Pointwise, Reduce, Src};
pub use crate::backend::kinds::Reduction;
use crate::backend::kinds::softmax_name;
use crate::element::{Element, Float};
use crate::error::{Error, Result};
use crate::shape::Layout;

impl Reduce for Cpu {
    fn reduce(&self, x: Src<'_, CpuBuffer>, axes: &[usize], kind: Reduction) -> Result<CpuBuffer> {
        let op = kind.name();
        let dims = x.dims();
        let kept: Vec<usize> = (0..dims.len())
            .filter(|a| !axes.contains(a))
            .map(|a| dims[a])
            .collect();
        // The sum over the empty axis of [0, 2^62] is 2^62 zeros.
        ensure_output(op, &kept, x.dtype())?;
        if x.numel() == 0 && x.dtype().is_float() {
            // Only sums reach here with elements to produce (extrema of empty axes are
            // refused first), and the groups' sizes may overflow even though none exists.
            let groups = kept.iter().product();
            return Ok(map_buffer!(x.memory, |_values| vec![
                Default::default();
                groups
            ]));
        }
        if !x.layout.is_contiguous() {
            // The kernel copies a strided input (a broadcast view holds few values but its
            // copy holds every element).
            ensure_output(op, dims, x.dtype())?;
        }
        Ok(with_float!(x.memory, op, |data: T| T::into_buffer(reduce(
            data, x.layout, axes, kind
        ))))
    }

    fn arg_reduce(&self, x: Src<'_, CpuBuffer>, axis: usize, max: bool) -> Result<CpuBuffer> {
        let op = if max { "argmax" } else { "argmin" };
        Ok(CpuBuffer::I64(with_float!(x.memory, op, |data: T| {
            arg_extremum(data, x.layout, axis, max)
        })))
    }

    fn softmax(&self, x: Src<'_, CpuBuffer>, log: bool) -> Result<CpuBuffer> {
        let op = softmax_name(log);
        // The rows are copied out, and the result holds as many elements again.
        ensure_output(op, x.dims(), x.dtype())?;
        let n = x.dims().last().copied().unwrap_or(1);
        Ok(with_float!(x.memory, op, |data: T| {
            let rows = map(data, x.layout, |v| v);
            T::into_buffer(softmax_rows(&rows, n, log))
        }))
    }

    fn softmax_backward(
        &self,
        grad: Src<'_, CpuBuffer>,
        x: Src<'_, CpuBuffer>,
        log: bool,
    ) -> Result<CpuBuffer> {
        let op = softmax_name(log);
        ensure_output(op, x.dims(), x.dtype())?;
        let n = x.dims().last().copied().unwrap_or(1);
        Ok(with_float!(x.memory, op, |data: T| {
            let grads = T::slice(grad.memory).ok_or(Error::DType {
                op,
                expected: "a gradient of the input's dtype",
                found: grad.dtype(),
            })?;
            let grad_rows = map(grads, grad.layout, |v| v);
            let rows = map(data, x.layout, |v| v);
            T::into_buffer(softmax_backward_rows(&rows, &grad_rows, n, log))
        }))
    }

    fn logsumexp_rows(&self, x: Src<'_, CpuBuffer>, axis: usize) -> Result<CpuBuffer> {
        let dims = x.dims();
        let classes = dims[axis];
        let inner: usize = dims[axis + 1..].iter().product();
        // Read where they are when contiguous, else from a copy.
        let copy;
        let (buffer, start) = if x.layout.is_contiguous() {
            (x.memory, x.layout.offset())
        } else {
            copy = self.copy(x)?;
            (&copy, 0)
        };
        let range = start..start + x.numel();
        Ok(with_float!(buffer, "logsumexp", |data: T| T::into_buffer(
            row_logsumexp(&data[range], classes, inner)
        )))
    }
}

/// Returns the input as contiguous groups: `(data, groups, group_len)` where output element
/// `i` reduces `data[i * group_len..(i + 1) * group_len]`. Borrows the input when the reduced
/// axes are already the innermost of a contiguous layout (softmax and norm statistics over
/// the last axis), copies otherwise.
fn grouped<'a, T: Copy + Sync + Send + Default + 'static>(
    a: &'a [T],
    layout: &Layout,
    axes: &[usize],
) -> (Cow<'a, [T]>, usize, usize) {
    let kept: Vec<usize> = (0..layout.rank())
        .filter(|axis| !axes.contains(axis))
        .collect();
    let groups = kept.iter().map(|&axis| layout.dims()[axis]).product();
    let group_len = axes.iter().map(|&axis| layout.dims()[axis]).product();
    let perm: Vec<usize> = kept.into_iter().chain(axes.iter().copied()).collect();
    let permuted = layout.permute(&perm);
    let data = if permuted.is_contiguous() {
        let start = permuted.offset();
        Cow::Borrowed(&a[start..start + permuted.numel()])
    } else {
        Cow::Owned(map(a, &permuted, |x| x))
    };
    (data, groups, group_len)
}

/// Sums the leading `rows` rows of a contiguous `[rows, inner]` block into `[inner]`, row by
/// row, so the inner loop runs over contiguous memory (a bias gradient summed over the batch
/// needs no transposed copy). Columns are split across threads when the block is large.
fn sum_leading_rows<T: Float>(data: &[T], rows: usize, inner: usize) -> Vec<T> {
    let mut out = vec![T::ZERO; inner];
    if inner == 0 {
        return out;
    }
    let columns = |first: usize, dst: &mut [T]| {
        for row in data.chunks_exact(inner).take(rows) {
            for (d, &v) in dst.iter_mut().zip(&row[first..]) {
                *d += v;
            }
        }
    };
    let chunk = (PARALLEL_GRAIN / rows.max(1)).max(64);
    if worth_splitting(rows * inner) && inner > chunk {
        out.par_chunks_mut(chunk)
            .enumerate()
            .for_each(|(i, dst)| columns(i * chunk, dst));
    } else {
        columns(0, &mut out);
    }
    out
}

/// Sum with eight independent accumulators: faster than one chain and more accurate.
#[inline]
pub fn sum_slice<T: Float>(values: &[T]) -> T {
    let mut lanes = [T::ZERO; 8];
    let mut chunks = values.chunks_exact(8);
    for chunk in &mut chunks {
        // Indexed rather than zipped, as in `conv_tiles::step`: a `Zip` made per chunk of 8
        // is a call where codegen units are not inlined into each other.
        for (j, lane) in lanes.iter_mut().enumerate() {
            *lane += chunk[j];
        }
    }
    let mut total = T::ZERO;
    for &v in chunks.remainder() {
        total += v;
    }
    (lanes[0] + lanes[4])
        + (lanes[1] + lanes[5])
        + (lanes[2] + lanes[6])
        + (lanes[3] + lanes[7])
        + total
}

/// `a . b` (`b` at least as long as `a`) in eight independent partial sums, so the compiler
/// keeps them in one vector register (a single running sum is a chain it may not reorder).
/// Indexed rather than zipped: `Zip::new` is not `#[inline]`, and callers run this per edge
/// or per key, where a call each doubled their time without LTO between codegen units.
#[inline]
pub fn dot<T: Float>(a: &[T], b: &[T]) -> T {
    const LANES: usize = 8;
    let mut partial = [T::ZERO; LANES];
    let (a_body, a_tail) = a.split_at(a.len() / LANES * LANES);
    let (b_body, b_tail) = b[..a.len()].split_at(a_body.len());
    for (c, ca) in a_body.chunks_exact(LANES).enumerate() {
        let cb = &b_body[c * LANES..(c + 1) * LANES];
        for k in 0..LANES {
            partial[k] += ca[k] * cb[k];
        }
    }
    let mut sum = partial.iter().fold(T::ZERO, |s, &p| s + p);
    for (k, &x) in a_tail.iter().enumerate() {
        sum += x * b_tail[k];
    }
    sum
}

// `#[inline]` (as `sum_slice`): softmax calls both per row from another codegen unit.
#[inline]
fn extremum<T: Float>(values: &[T], want_max: bool) -> T {
    let mut acc = if want_max {
        T::NEG_INFINITY
    } else {
        T::INFINITY
    };
    for &v in values {
        if v.is_nan() {
            return v;
        }
        if (want_max && v > acc) || (!want_max && v < acc) {
            acc = v;
        }
    }
    acc
}

/// Reduces `axes` (sorted, distinct) of the tensor; the result is laid out over the kept axes.
pub fn reduce<T: Float + Default>(
    a: &[T],
    layout: &Layout,
    axes: &[usize],
    kind: Reduction,
) -> Vec<T> {
    let leading = axes.iter().enumerate().all(|(i, &axis)| i == axis);
    if kind == Reduction::Sum && leading && layout.is_contiguous() && axes.len() < layout.rank() {
        let rows: usize = layout.dims()[..axes.len()].iter().product();
        let inner: usize = layout.dims()[axes.len()..].iter().product();
        let start = layout.offset();
        return sum_leading_rows(&a[start..start + rows * inner], rows, inner);
    }
    let (data, groups, group_len) = grouped(a, layout, axes);
    let mut out = vec![T::ZERO; groups];
    if group_len == 0 {
        // Reducing an empty axis: sums are zero, extrema have no value.
        let fill = match kind {
            Reduction::Sum => T::ZERO,
            Reduction::Max => T::NEG_INFINITY,
            Reduction::Min => T::INFINITY,
        };
        out.iter_mut().for_each(|o| *o = fill);
        return out;
    }
    let reduce_group = |i: usize| {
        let group = &data[i * group_len..(i + 1) * group_len];
        match kind {
            Reduction::Sum => sum_slice(group),
            Reduction::Max => extremum(group, true),
            Reduction::Min => extremum(group, false),
        }
    };
    if worth_splitting(data.len()) && groups > 1 {
        out.par_iter_mut()
            .enumerate()
            .for_each(|(i, o)| *o = reduce_group(i));
    } else {
        out.iter_mut()
            .enumerate()
            .for_each(|(i, o)| *o = reduce_group(i));
    }
    out
}

/// Index of the largest (or smallest) element along `axis`; first index wins ties.
pub fn arg_extremum<T: Float + Default>(
    a: &[T],
    layout: &Layout,
    axis: usize,
    want_max: bool,
) -> Vec<i64> {
    let (data, groups, group_len) = grouped(a, layout, &[axis]);
    let mut out = vec![0i64; groups];
    for_each_row(&mut out, 1, |i, o| {
        let group = &data[i * group_len..(i + 1) * group_len];
        let mut best = 0;
        for (j, &v) in group.iter().enumerate() {
            let better = if want_max {
                v > group[best]
            } else {
                v < group[best]
            };
            if better || (v.is_nan() && !group[best].is_nan()) {
                best = j;
            }
        }
        o[0] = best as i64;
    });
    out
}

/// Numerically stable softmax (or log-softmax) of each contiguous row of length `n`.
pub fn softmax_rows<T: Float + Default>(rows: &[T], n: usize, log: bool) -> Vec<T> {
    // Every element is written: reused memory rather than fresh pages to fault in.
    let mut out = super::pool::reused(rows.len(), T::ZERO);
    for_each_row(&mut out, n, |r, dst| {
        let src = &rows[r * n..(r + 1) * n];
        let max = extremum(src, true);
        let shift = if max == T::NEG_INFINITY || max == T::INFINITY {
            T::ZERO
        } else {
            max
        };
        let mut total = T::ZERO;
        for (d, &x) in dst.iter_mut().zip(src) {
            *d = (x - shift).exp();
            total += *d;
        }
        if log {
            let log_total = total.ln() + shift;
            for (d, &x) in dst.iter_mut().zip(src) {
                *d = x - log_total;
            }
        } else {
            let inv = T::ONE / total;
            for d in dst.iter_mut() {
                *d *= inv;
            }
        }
    });
    out
}

/// The input gradient of softmax (`y * (g - sum(g * y))`) or log-softmax (`g - y * sum(g)`)
/// of each contiguous row of length `n` of `rows`, given the output gradient rows `grads`;
/// `y`, the softmax, is recomputed.
pub fn softmax_backward_rows<T: Float + Default>(
    rows: &[T],
    grads: &[T],
    n: usize,
    log: bool,
) -> Vec<T> {
    let mut out = softmax_rows(rows, n, false);
    for_each_row(&mut out, n, |r, y| {
        let g = &grads[r * n..(r + 1) * n];
        if log {
            let total = g.iter().fold(T::ZERO, |acc, &v| acc + v);
            for (d, &gj) in y.iter_mut().zip(g) {
                *d = gj - *d * total;
            }
        } else {
            let total = y
                .iter()
                .zip(g)
                .fold(T::ZERO, |acc, (&yj, &gj)| acc + yj * gj);
            for (d, &gj) in y.iter_mut().zip(g) {
                *d *= gj - total;
            }
        }
    });
    out
}

/// Each row's log-sum-exp of contiguous `x` laid out `[outer, classes, inner]`, summed in
/// f64, over the classes: rows `(o, i)`, `outer * inner` of them.
fn row_logsumexp<T: Float>(x: &[T], classes: usize, inner: usize) -> Vec<T> {
    let rows = x.len() / classes.max(1);
    (0..rows)
        .into_par_iter()
        .map(|r| {
            let first = (r / inner) * classes * inner + r % inner;
            let values = (0..classes).map(|c| x[first + c * inner].to_f64());
            let max = values.clone().fold(f64::NEG_INFINITY, |m, v| {
                if v.is_nan() || m.is_nan() {
                    f64::NAN
                } else {
                    m.max(v)
                }
            });
            if max.is_infinite() || max.is_nan() {
                return T::from_f64(max);
            }
            let sum: f64 = values.map(|v| (v - max).exp()).sum();
            T::from_f64(max + sum.ln())
        })
        .collect()
}
