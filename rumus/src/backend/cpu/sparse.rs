//! The CPU's side of the [`Sparse`] contract: products with a compressed-row matrix and the
//! per-row maximum of edge messages. Rows are shared among threads in consecutive ranges of
//! about equal work (a row costs its entries plus one), not of equal length, so the hub rows
//! of a power-law graph do not leave one thread with most of the products.

use std::borrow::Cow;
use std::ops::Range;

use rayon::prelude::*;

use super::backend::{Cpu, ensure_output};
use super::buffer::CpuBuffer;
use super::parallel::{threads, worth_splitting};
use super::reduce::dot;
use super::simd::widest_isa;
use crate::backend::contract::{CsrPattern, Sparse, Src, check_index_dtype, split_rows};
use crate::dtype::DType;
use crate::element::{Element, Float};
use crate::error::{Error, Result, ShapeError};
use crate::shape::Layout;

impl Sparse for Cpu {
    fn spmm(
        &self,
        pattern: CsrPattern<'_, CpuBuffer>,
        values: Src<'_, CpuBuffer>,
        x: Src<'_, CpuBuffer>,
    ) -> Result<CpuBuffer> {
        const OP: &str = "spmm";
        let (rows, width) = split_rows(x.dims(), OP)?;
        let (row_ptr, cols) = checked_pattern(pattern, rows, OP)?;
        same_dtype(OP, values, x)?;
        if values.dims() != [cols.len()] {
            return Err(invalid(
                OP,
                format!(
                    "{} entries take {} values, got shape {:?}",
                    cols.len(),
                    cols.len(),
                    values.dims()
                ),
            ));
        }
        let mut dims = x.dims().to_vec();
        dims[0] = row_ptr.len() - 1;
        ensure_output(OP, &dims, x.dtype())?;
        let shape = Product {
            row_ptr: &row_ptr,
            cols: &cols,
            width,
        };
        match x.dtype() {
            DType::F32 => Ok(f32::into_buffer(spmm_typed::<f32>(shape, values, x))),
            DType::F64 => Ok(f64::into_buffer(spmm_typed::<f64>(shape, values, x))),
            found => Err(not_float(OP, found)),
        }
    }

    fn sddmm(
        &self,
        pattern: CsrPattern<'_, CpuBuffer>,
        a: Src<'_, CpuBuffer>,
        b: Src<'_, CpuBuffer>,
    ) -> Result<CpuBuffer> {
        const OP: &str = "sddmm";
        let (_, width) = split_rows(a.dims(), OP)?;
        let (b_rows, b_width) = split_rows(b.dims(), OP)?;
        if a.dims()[1..] != b.dims()[1..] || width != b_width {
            return Err(ShapeError::Invalid {
                context: OP.into(),
                message: format!(
                    "the row operands {:?} and {:?} must share every axis after the first",
                    a.dims(),
                    b.dims()
                ),
            }
            .into());
        }
        let (row_ptr, cols) = checked_pattern(pattern, b_rows, OP)?;
        check_row_count(&row_ptr, a.dims()[0], OP)?;
        same_dtype(OP, a, b)?;
        ensure_output(OP, &[cols.len()], a.dtype())?;
        let shape = Product {
            row_ptr: &row_ptr,
            cols: &cols,
            width,
        };
        match a.dtype() {
            DType::F32 => Ok(f32::into_buffer(sddmm_typed::<f32>(shape, a, b))),
            DType::F64 => Ok(f64::into_buffer(sddmm_typed::<f64>(shape, a, b))),
            found => Err(not_float(OP, found)),
        }
    }

    fn segment_max(
        &self,
        row_ptr: Src<'_, CpuBuffer>,
        messages: Src<'_, CpuBuffer>,
    ) -> Result<(CpuBuffer, CpuBuffer)> {
        const OP: &str = "segment_max";
        let (entries, width) = split_rows(messages.dims(), OP)?;
        let row_ptr = checked_row_ptr(row_ptr, entries, OP)?;
        let mut dims = messages.dims().to_vec();
        dims[0] = row_ptr.len() - 1;
        ensure_output(OP, &dims, messages.dtype())?;
        ensure_output(OP, &dims, DType::I64)?;
        match messages.dtype() {
            DType::F32 => {
                let (max, arg) = segment_max_typed::<f32>(&row_ptr, messages, width);
                Ok((f32::into_buffer(max), CpuBuffer::I64(arg)))
            }
            DType::F64 => {
                let (max, arg) = segment_max_typed::<f64>(&row_ptr, messages, width);
                Ok((f64::into_buffer(max), CpuBuffer::I64(arg)))
            }
            found => Err(not_float(OP, found)),
        }
    }
}

/// The pattern's arrays and the width of one dense row: what every product loop reads.
#[derive(Clone, Copy)]
struct Product<'a> {
    row_ptr: &'a [i64],
    cols: &'a [i64],
    width: usize,
}

impl Product<'_> {
    /// The entries of row `i`.
    #[inline]
    fn entries(&self, i: usize) -> Range<usize> {
        self.row_ptr[i] as usize..self.row_ptr[i + 1] as usize
    }

    /// The dense row `c` of `x`.
    #[inline]
    fn dense_row<'x, T>(&self, x: &'x [T], c: i64) -> &'x [T] {
        let start = c as usize * self.width;
        &x[start..start + self.width]
    }
}

fn spmm_typed<T: Float>(
    shape: Product<'_>,
    values: Src<'_, CpuBuffer>,
    x: Src<'_, CpuBuffer>,
) -> Vec<T> {
    let (values, x) = (contiguous::<T>(values), contiguous::<T>(x));
    let rows = shape.row_ptr.len() - 1;
    let mut out = super::pool::reused(rows * shape.width, T::ZERO);
    let task = |range: Range<usize>, out: &mut [T]| spmm_rows(shape, &values, &x, range, out);
    for_balanced_rows(shape.row_ptr, shape.width, &mut out, &task);
    out
}

widest_isa! {
    /// Rows `range` of the product into `out` (those rows, zeroed).
    fn spmm_rows<T: Float>(
        shape: Product<'_>,
        values: &[T],
        x: &[T],
        range: Range<usize>,
        out: &mut [T],
    ) => spmm_rows_plain
}

/// Columns of an output row summed in registers at a time: 64 `f32`s are four AVX-512 or
/// eight AVX2 registers, so a row of a 64-wide product is read from memory once per entry
/// and written once, instead of loaded and stored again for every entry.
const CHUNK: usize = 64;

/// Entries ahead whose dense rows are prefetched. The rows are read in the pattern's order,
/// at random for a graph, so each one's memory latency, not bandwidth, bounds the product.
const PREFETCH_ENTRIES: usize = 8;

#[inline(always)]
fn spmm_rows_plain<T: Float>(
    shape: Product<'_>,
    values: &[T],
    x: &[T],
    range: Range<usize>,
    out: &mut [T],
) {
    let width = shape.width;
    if width == 0 {
        return;
    }
    let entries = shape.cols.len();
    for (i, out_row) in range.zip(out.chunks_exact_mut(width)) {
        for start in (0..width).step_by(CHUNK) {
            let len = CHUNK.min(width - start);
            let mut sum = [T::ZERO; CHUNK];
            for e in shape.entries(i) {
                if start == 0 && e + PREFETCH_ENTRIES < entries {
                    prefetch(shape.dense_row(x, shape.cols[e + PREFETCH_ENTRIES]));
                }
                let v = values[e];
                let x_part = &shape.dense_row(x, shape.cols[e])[start..start + len];
                if let Ok(x_part) = <&[T; CHUNK]>::try_from(x_part) {
                    // A fixed length: the loop unrolls into vector registers.
                    for k in 0..CHUNK {
                        sum[k] += v * x_part[k];
                    }
                } else {
                    // Indexed, as in `dot`: a `Zip` per entry is a call without LTO.
                    for (k, &xv) in x_part.iter().enumerate() {
                        sum[k] += v * xv;
                    }
                }
            }
            out_row[start..start + len].copy_from_slice(&sum[..len]);
        }
    }
}

/// Asks the CPU to start loading `row` into its caches (a hint: it never faults).
#[inline(always)]
fn prefetch<T>(row: &[T]) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let bytes = std::mem::size_of_val(row);
        let start = row.as_ptr().cast::<i8>();
        for offset in (0..bytes).step_by(64) {
            // SAFETY: a prefetch is a hint that never faults, and the address is inside
            // `row`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(start.wrapping_add(offset)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = row;
}

fn sddmm_typed<T: Float>(
    shape: Product<'_>,
    a: Src<'_, CpuBuffer>,
    b: Src<'_, CpuBuffer>,
) -> Vec<T> {
    let (a, b) = (contiguous::<T>(a), contiguous::<T>(b));
    let mut out = super::pool::reused(shape.cols.len(), T::ZERO);
    // The output is per entry: the ranges of rows map to ranges of entries.
    let task = |range: Range<usize>, out: &mut [T]| sddmm_rows(shape, &a, &b, range, out);
    for_balanced_entries(shape.row_ptr, shape.width, &mut out, &task);
    out
}

widest_isa! {
    /// The entries of rows `range` into `out` (those entries).
    fn sddmm_rows<T: Float>(
        shape: Product<'_>,
        a: &[T],
        b: &[T],
        range: Range<usize>,
        out: &mut [T],
    ) => sddmm_rows_plain
}

#[inline(always)]
fn sddmm_rows_plain<T: Float>(
    shape: Product<'_>,
    a: &[T],
    b: &[T],
    range: Range<usize>,
    out: &mut [T],
) {
    let first = shape.row_ptr[range.start] as usize;
    let entries = shape.cols.len();
    for i in range {
        let a_row = &a[i * shape.width..(i + 1) * shape.width];
        for e in shape.entries(i) {
            if e + PREFETCH_ENTRIES < entries {
                prefetch(shape.dense_row(b, shape.cols[e + PREFETCH_ENTRIES]));
            }
            out[e - first] = dot(a_row, shape.dense_row(b, shape.cols[e]));
        }
    }
}

fn segment_max_typed<T: Float>(
    row_ptr: &[i64],
    messages: Src<'_, CpuBuffer>,
    width: usize,
) -> (Vec<T>, Vec<i64>) {
    let messages = contiguous::<T>(messages);
    let rows = row_ptr.len() - 1;
    let entries = *row_ptr.last().unwrap_or(&0);
    let mut max = vec![T::ZERO; rows * width];
    let mut arg = vec![entries; rows * width];
    if width == 0 {
        return (max, arg);
    }
    // One pass per row over its entries; cheap next to the products, so left serial.
    for (i, (max_row, arg_row)) in max
        .chunks_exact_mut(width)
        .zip(arg.chunks_exact_mut(width))
        .enumerate()
    {
        for e in row_ptr[i] as usize..row_ptr[i + 1] as usize {
            let message = &messages[e * width..(e + 1) * width];
            for ((best, at), &m) in max_row.iter_mut().zip(arg_row.iter_mut()).zip(message) {
                let first = *at == entries;
                if first || m > *best || (m.is_nan() && !best.is_nan()) {
                    *best = m;
                    *at = e as i64;
                }
            }
        }
    }
    (max, arg)
}

/// Runs `task(rows, out_rows)` over consecutive ranges of rows of about equal work, each with
/// its `width`-wide rows of `out`: on this thread when the whole is small.
fn for_balanced_rows<T: Send>(
    row_ptr: &[i64],
    width: usize,
    out: &mut [T],
    task: &(dyn Fn(Range<usize>, &mut [T]) + Sync),
) {
    let ranges = balanced_ranges(row_ptr, width);
    let mut parts = Vec::with_capacity(ranges.len());
    let mut rest = out;
    for range in ranges {
        let (part, tail) = rest.split_at_mut(range.len() * width);
        parts.push((range, part));
        rest = tail;
    }
    run_parts(parts, task);
}

/// [`for_balanced_rows`] for an output with one element per entry: each range of rows gets
/// its entries' elements.
fn for_balanced_entries<T: Send>(
    row_ptr: &[i64],
    width: usize,
    out: &mut [T],
    task: &(dyn Fn(Range<usize>, &mut [T]) + Sync),
) {
    let ranges = balanced_ranges(row_ptr, width);
    let mut parts = Vec::with_capacity(ranges.len());
    let mut rest = out;
    for range in ranges {
        let entries = (row_ptr[range.end] - row_ptr[range.start]) as usize;
        let (part, tail) = rest.split_at_mut(entries);
        parts.push((range, part));
        rest = tail;
    }
    run_parts(parts, task);
}

fn run_parts<T: Send>(
    parts: Vec<(Range<usize>, &mut [T])>,
    task: &(dyn Fn(Range<usize>, &mut [T]) + Sync),
) {
    if parts.len() == 1 {
        for (range, part) in parts {
            task(range, part);
        }
    } else {
        parts
            .into_par_iter()
            .for_each(|(range, part)| task(range, part));
    }
}

/// Rows `0..n` cut into consecutive ranges of about equal work, a row costing its entries
/// plus one (writing its output) times `width`: one range when the work is below the
/// parallel grain, else four per thread, so an unlucky range does not hold up the rest.
fn balanced_ranges(row_ptr: &[i64], width: usize) -> Vec<Range<usize>> {
    let rows = row_ptr.len() - 1;
    let cost = |r: usize| row_ptr[r] as usize + r;
    let total = cost(rows);
    if !worth_splitting(total * width.max(1)) || rows < 2 {
        return std::iter::once(0..rows).collect();
    }
    let tasks = (threads() * 4).min(rows);
    let per_task = total.div_ceil(tasks).max(1);
    let mut ranges = Vec::with_capacity(tasks);
    let mut start = 0;
    for k in 1..tasks {
        // The first row whose cumulative cost reaches this task's share.
        let (mut low, mut high) = (start, rows);
        while low < high {
            let middle = (low + high) / 2;
            if cost(middle) < k * per_task {
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        let end = low;
        if end > start {
            ranges.push(start..end);
            start = end;
        }
    }
    ranges.push(start..rows);
    ranges
}

/// A float operand's elements in row-major order: borrowed when contiguous.
fn contiguous<'a, T: Float>(x: Src<'a, CpuBuffer>) -> Cow<'a, [T]> {
    let data = T::slice(x.memory).expect("dtype checked by the caller");
    contiguous_view(data, x.layout)
}

/// `data` read through `layout` in row-major order: borrowed when contiguous.
fn contiguous_view<'a, T: Copy + Default + Send + Sync + 'static>(
    data: &'a [T],
    layout: &Layout,
) -> Cow<'a, [T]> {
    if layout.is_contiguous() {
        Cow::Borrowed(&data[layout.offset()..layout.offset() + layout.numel()])
    } else {
        Cow::Owned(super::strided::map(data, layout, |e| e))
    }
}

/// An `i64` index operand's values.
fn index_values<'a>(x: Src<'a, CpuBuffer>, op: &'static str) -> Result<Cow<'a, [i64]>> {
    check_index_dtype(x.dtype(), op)?;
    if x.dims().len() != 1 {
        return Err(invalid(
            op,
            format!("index arrays are 1-D, got {:?}", x.dims()),
        ));
    }
    let CpuBuffer::I64(data) = x.memory else {
        unreachable!("checked to be i64 above")
    };
    Ok(contiguous_view(data, x.layout))
}

/// Row pointers checked to run from 0 to `entries` without decreasing.
fn checked_row_ptr<'a>(
    row_ptr: Src<'a, CpuBuffer>,
    entries: usize,
    op: &'static str,
) -> Result<Cow<'a, [i64]>> {
    let row_ptr = index_values(row_ptr, op)?;
    let ends_right = row_ptr.first() == Some(&0) && row_ptr.last() == Some(&(entries as i64));
    if !ends_right || row_ptr.windows(2).any(|w| w[0] > w[1]) {
        return Err(invalid(
            op,
            format!(
                "row pointers must run from 0 to the {entries} entries without decreasing \
                 (got {} of them, first {:?}, last {:?})",
                row_ptr.len(),
                row_ptr.first(),
                row_ptr.last()
            ),
        ));
    }
    Ok(row_ptr)
}

/// A pattern's row pointers and columns on the host.
type PatternArrays<'a> = (Cow<'a, [i64]>, Cow<'a, [i64]>);

/// The pattern's row pointers and columns, every column checked to lie in `0..columns`.
fn checked_pattern<'a>(
    pattern: CsrPattern<'a, CpuBuffer>,
    columns: usize,
    op: &'static str,
) -> Result<PatternArrays<'a>> {
    let cols = index_values(pattern.cols, op)?;
    let row_ptr = checked_row_ptr(pattern.row_ptr, cols.len(), op)?;
    if let Some(&bad) = cols.iter().find(|&&c| c < 0 || c as usize >= columns) {
        return Err(Error::IndexOutOfRange {
            op,
            index: bad,
            axis: 0,
            size: columns,
        });
    }
    Ok((row_ptr, cols))
}

/// A row operand of the pattern's `n` rows.
fn check_row_count(row_ptr: &[i64], rows: usize, op: &'static str) -> Result<()> {
    if row_ptr.len() - 1 != rows {
        return Err(invalid(
            op,
            format!(
                "the pattern has {} rows but the row operand {rows}",
                row_ptr.len() - 1
            ),
        ));
    }
    Ok(())
}

fn same_dtype(op: &'static str, a: Src<'_, CpuBuffer>, b: Src<'_, CpuBuffer>) -> Result<()> {
    if a.dtype() != b.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            lhs: a.dtype(),
            rhs: b.dtype(),
        });
    }
    Ok(())
}

fn not_float(op: &'static str, found: DType) -> Error {
    Error::DType {
        op,
        expected: "an f32 or f64 tensor",
        found,
    }
}

fn invalid(op: &'static str, message: String) -> Error {
    ShapeError::Invalid {
        context: op.into(),
        message,
    }
    .into()
}
