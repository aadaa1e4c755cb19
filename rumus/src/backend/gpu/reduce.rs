//! Launchers of `shaders/reduce.wgsl`: reductions and softmax over contiguous rows, and the
//! GPU's side of the [`Reduce`] contract.

use super::batch::grid_rows;
use super::context::GpuDevice;
use super::elementwise::check_float;
use super::memory::{GpuBuffer, check_words};
use super::packed::Packed;
use super::pipelines::Module;
use crate::backend::kinds::Reduction;
use crate::backend::{Allocate, Reduce, Src};
use crate::dtype::DType;
use crate::error::Result;

/// An operand read as contiguous rows.
struct Rows<'a> {
    packed: Packed<'a>,
    rows: usize,
    len: usize,
}

impl Rows<'_> {
    fn memory(&self) -> &GpuBuffer {
        self.packed.memory()
    }

    /// Where the first row starts, in elements.
    fn offset(&self) -> usize {
        self.packed.offset
    }
}

/// `x` as contiguous rows with the `axes` last.
fn grouped<'a>(gpu: &GpuDevice, x: Src<'a, GpuBuffer>, axes: &[usize]) -> Result<Rows<'a>> {
    let dims = x.dims();
    let kept: Vec<usize> = (0..dims.len()).filter(|a| !axes.contains(a)).collect();
    let rows = kept.iter().map(|&a| dims[a]).product();
    let len = axes.iter().map(|&a| dims[a]).product();
    let perm: Vec<usize> = kept.into_iter().chain(axes.iter().copied()).collect();
    let moved = x.layout.permute(&perm);
    Ok(Rows {
        packed: Packed::new(gpu, x.memory, &moved)?,
        rows,
        len,
    })
}

/// Columns a `sum_columns` workgroup covers.
const SUM_COLUMNS_WIDTH: usize = 32;

/// Invocations per row of a row kernel (`reduce_rows`, the softmax): about eight elements
/// each, 32 to a whole workgroup of 256.
fn row_segment(len: usize) -> usize {
    len.div_ceil(8).next_power_of_two().clamp(32, 256)
}

/// An error where one invocation of the row kernel `entry` would loop past the device's
/// budget (lavapipe): per pass over the row, its share of the row (`len / segment`), plus
/// the loops over the cached elements and the segment trees (up to 9 and 8 each, a few of
/// each per kernel).
fn check_row_loops(gpu: &GpuDevice, entry: &str, len: usize) -> Result<()> {
    let (op, passes) = match entry {
        "reduce_rows" => ("reduction", 1),
        "logsumexp_rows" => ("logsumexp", 2),
        "softmax_rows" => ("softmax", 3),
        _ => ("softmax backward", 4),
    };
    gpu.check_loop_budget(op, passes * len.div_ceil(row_segment(len)) + 128)
}

impl GpuDevice {
    fn rows_kernel(
        &self,
        entry: &'static str,
        input: &Rows<'_>,
        op: u32,
        out: &GpuBuffer,
    ) -> Result<()> {
        let (rows, len) = (input.rows, input.len);
        check_row_loops(self, entry, len)?;
        let segment = row_segment(len);
        let (groups, row) = grid_rows(rows.div_ceil(256 / segment));
        let params = [
            rows as u32,
            len as u32,
            op,
            row,
            input.offset() as u32,
            segment as u32,
        ];
        let groups = if rows == 0 { [0, 0, 0] } else { groups };
        self.dispatch(
            Module::Reduce,
            entry,
            &params,
            &[(1, input.memory().raw()), (2, out.raw())],
            groups,
        );
        Ok(())
    }

    /// Sums over the leading `rows` of the contiguous elements of `x` from `offset`, viewed
    /// as `[rows, cols]`, in passes of `CHUNK`-row partial sums (reads stay coalesced, no
    /// transposed copy).
    fn sum_columns(
        &self,
        x: &GpuBuffer,
        offset: usize,
        rows: usize,
        cols: usize,
    ) -> Result<GpuBuffer> {
        // 32 loads for each of a workgroup's 256 invocations: a bias gradient over 8,192 rows
        // runs as 32 chunks, then one pass over those.
        const CHUNK: usize = 256;
        let mut partial: Option<GpuBuffer> = None;
        let (mut offset, mut rows) = (offset, rows);
        loop {
            let chunk = if rows <= CHUNK {
                rows.max(1)
            } else {
                CHUNK.max(rows.div_ceil(65_535))
            };
            let chunks = rows.div_ceil(chunk).max(1);
            let out = GpuBuffer::uninit(self, chunks * cols, DType::F32, "sum")?;
            let params = [rows as u32, cols as u32, chunk as u32, offset as u32];
            let input = partial.as_ref().unwrap_or(x);
            let groups = if cols == 0 {
                [0, 0, 0]
            } else {
                [cols.div_ceil(SUM_COLUMNS_WIDTH) as u32, chunks as u32, 1]
            };
            self.dispatch(
                Module::Reduce,
                "sum_columns",
                &params,
                &[(1, input.raw()), (2, out.raw())],
                groups,
            );
            if chunks == 1 {
                return Ok(out);
            }
            partial = Some(out);
            offset = 0;
            rows = chunks;
        }
    }

    /// Runs a softmax kernel over the rows along the last axis of `x` (made contiguous,
    /// `grad` alike).
    fn softmax_kernel(
        &self,
        entry: &'static str,
        x: Src<'_, GpuBuffer>,
        grad: Option<Src<'_, GpuBuffer>>,
        log: bool,
    ) -> Result<GpuBuffer> {
        check_float(x.dtype(), "softmax")?;
        if x.numel() == 0 {
            // No rows to normalise (and their sizes may multiply past usize).
            return Allocate::full(self, x.dims(), 0.0, DType::F32);
        }
        let axis = x.dims().len() - 1;
        let input = grouped(self, x, &[axis])?;
        let grad_rows = grad.map(|g| grouped(self, g, &[axis])).transpose()?;
        if let Some(g) = &grad_rows {
            check_words(g.memory().dtype(), "GPU kernel")?;
        }
        let (rows, len) = (input.rows, input.len);
        check_row_loops(self, entry, len)?;
        let out = GpuBuffer::uninit(self, rows * len, DType::F32, "softmax")?;
        let segment = row_segment(len);
        let (groups, row) = grid_rows(rows.div_ceil(256 / segment));
        let grad_offset = grad_rows.as_ref().map_or(0, Rows::offset);
        let params = [
            rows as u32,
            len as u32,
            u32::from(log),
            row,
            input.offset() as u32,
            segment as u32,
            grad_offset as u32,
        ];
        let mut bindings = vec![(1, input.memory().raw()), (2, out.raw())];
        bindings.extend(grad_rows.as_ref().map(|g| (3, g.memory().raw())));
        let groups = if rows == 0 { [0, 0, 0] } else { groups };
        self.dispatch(Module::Reduce, entry, &params, &bindings, groups);
        Ok(out)
    }
}

impl Reduce for GpuDevice {
    fn reduce(
        &self,
        x: Src<'_, GpuBuffer>,
        axes: &[usize],
        kind: Reduction,
    ) -> Result<GpuBuffer> {
        check_float(x.dtype(), "reduction")?;
        let dims = x.dims();
        if x.numel() == 0 {
            // Sums of nothing (extrema of empty axes are refused before): no kernel, and the
            // groups' sizes may multiply past usize.
            let kept: Vec<usize> = (0..dims.len())
                .filter(|a| !axes.contains(a))
                .map(|a| dims[a])
                .collect();
            return Allocate::full(self, &kept, 0.0, x.dtype());
        }
        let leading = axes.iter().enumerate().all(|(i, &a)| i == a);
        if kind == Reduction::Sum && leading && !axes.is_empty() && x.layout.is_contiguous() {
            let rows = dims[..axes.len()].iter().product();
            let cols: usize = dims[axes.len()..].iter().product();
            if cols.div_ceil(SUM_COLUMNS_WIDTH) <= 65_535 {
                return self.sum_columns(x.memory, x.layout.offset(), rows, cols);
            }
        }
        let input = grouped(self, x, axes)?;
        let out = GpuBuffer::uninit(self, input.rows, DType::F32, "reduction")?;
        let op = match kind {
            Reduction::Sum => 0,
            Reduction::Max => 1,
            Reduction::Min => 2,
        };
        self.rows_kernel("reduce_rows", &input, op, &out)?;
        Ok(out)
    }

    /// `i64` indices, `i32` on the GPU.
    fn arg_reduce(&self, x: Src<'_, GpuBuffer>, axis: usize, max: bool) -> Result<GpuBuffer> {
        check_float(x.dtype(), "argmax")?;
        let input = grouped(self, x, &[axis])?;
        let out = GpuBuffer::uninit(self, input.rows, DType::I64, "argmax")?;
        let op = if max { 3 } else { 4 };
        self.rows_kernel("reduce_rows", &input, op, &out)?;
        Ok(out)
    }

    fn softmax(&self, x: Src<'_, GpuBuffer>, log: bool) -> Result<GpuBuffer> {
        self.softmax_kernel("softmax_rows", x, None, log)
    }

    fn softmax_backward(
        &self,
        grad: Src<'_, GpuBuffer>,
        x: Src<'_, GpuBuffer>,
        log: bool,
    ) -> Result<GpuBuffer> {
        self.softmax_kernel("softmax_backward_rows", x, Some(grad), log)
    }

    fn logsumexp_rows(&self, x: Src<'_, GpuBuffer>, axis: usize) -> Result<GpuBuffer> {
        check_float(x.dtype(), "logsumexp")?;
        let input = grouped(self, x, &[axis])?;
        let out = GpuBuffer::uninit(self, input.rows, DType::F32, "logsumexp")?;
        self.rows_kernel("logsumexp_rows", &input, 0, &out)?;
        Ok(out)
    }
}
