//! Launchers of `shaders/reduce.wgsl`: reductions and softmax over contiguous rows.

use super::batch::grid_rows;
use super::context::GpuDevice;
use super::elementwise::check_float;
use super::memory::GpuBuffer;
use super::pipelines::Module;
use crate::backend::cpu::reduce::Reduction;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::DynTensor;

/// `x` as contiguous rows with the `axes` last: (tensor, rows, row length).
fn grouped(gpu: &GpuDevice, x: &DynTensor, axes: &[usize]) -> Result<(DynTensor, usize, usize)> {
    let kept: Vec<usize> = (0..x.rank()).filter(|a| !axes.contains(a)).collect();
    let rows = kept.iter().map(|&a| x.dims()[a]).product();
    let len = axes.iter().map(|&a| x.dims()[a]).product();
    let perm: Vec<usize> = kept.into_iter().chain(axes.iter().copied()).collect();
    let moved = x.view_with(x.layout().permute(&perm));
    let moved = if moved.is_contiguous() {
        moved
    } else {
        gpu.copy_tensor(&moved)?
    };
    Ok((moved, rows, len))
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
        rows_input: &DynTensor,
        (rows, len): (usize, usize),
        op: u32,
        out: &GpuBuffer,
    ) -> Result<()> {
        check_row_loops(self, entry, len)?;
        let segment = row_segment(len);
        let (groups, row) = grid_rows(rows.div_ceil(256 / segment));
        let params = [
            rows as u32,
            len as u32,
            op,
            row,
            rows_input.layout().offset() as u32,
            segment as u32,
        ];
        let input = self.memory_of(rows_input)?;
        let groups = if rows == 0 { [0, 0, 0] } else { groups };
        self.dispatch(
            Module::Reduce,
            entry,
            &params,
            &[(1, input.raw()), (2, out.raw())],
            groups,
        );
        Ok(())
    }

    /// Sum, max or min over `axes`, shaped `out_dims`.
    pub(crate) fn reduce(
        &self,
        x: &DynTensor,
        axes: &[usize],
        kind: Reduction,
        out_dims: &[usize],
    ) -> Result<DynTensor> {
        check_float(x.dtype(), "reduction")?;
        if x.numel() == 0 {
            // Sums of nothing (extrema of empty axes are refused before): no kernel, and the
            // groups' sizes may multiply past usize.
            return self.full_tensor(out_dims, 0.0, x.dtype());
        }
        let leading = axes.iter().enumerate().all(|(i, &a)| i == a);
        if kind == Reduction::Sum && leading && !axes.is_empty() && x.is_contiguous() {
            let rows = x.dims()[..axes.len()].iter().product();
            let cols: usize = x.dims()[axes.len()..].iter().product();
            if cols.div_ceil(SUM_COLUMNS_WIDTH) <= 65_535 {
                return self.sum_columns(x, rows, cols, out_dims);
            }
        }
        let (rows_input, rows, len) = grouped(self, x, axes)?;
        let out = GpuBuffer::uninit(self, rows, DType::F32, "reduction")?;
        let op = match kind {
            Reduction::Sum => 0,
            Reduction::Max => 1,
            Reduction::Min => 2,
        };
        self.rows_kernel("reduce_rows", &rows_input, (rows, len), op, &out)?;
        Ok(DynTensor::from_gpu(out, out_dims))
    }

    /// Sums over the leading `rows` of contiguous `x` viewed as `[rows, cols]`, in passes of
    /// `CHUNK`-row partial sums (reads stay coalesced, no transposed copy).
    fn sum_columns(
        &self,
        x: &DynTensor,
        rows: usize,
        cols: usize,
        out_dims: &[usize],
    ) -> Result<DynTensor> {
        // 32 loads for each of a workgroup's 256 invocations: a bias gradient over 8,192 rows
        // runs as 32 chunks, then one pass over those.
        const CHUNK: usize = 256;
        let mut current = x.clone();
        let mut rows = rows;
        loop {
            let chunk = if rows <= CHUNK {
                rows.max(1)
            } else {
                CHUNK.max(rows.div_ceil(65_535))
            };
            let chunks = rows.div_ceil(chunk).max(1);
            let out = GpuBuffer::uninit(self, chunks * cols, DType::F32, "sum")?;
            let params = [
                rows as u32,
                cols as u32,
                chunk as u32,
                current.layout().offset() as u32,
            ];
            let input = self.memory_of(&current)?;
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
                return Ok(DynTensor::from_gpu(out, out_dims));
            }
            current = DynTensor::from_gpu(out, &[chunks, cols]);
            rows = chunks;
        }
    }

    /// Index of the largest (or smallest) value along `axis`, as `i64` (`i32` on the GPU).
    pub(crate) fn arg_reduce(
        &self,
        x: &DynTensor,
        axis: usize,
        max: bool,
        out_dims: &[usize],
    ) -> Result<DynTensor> {
        check_float(x.dtype(), "argmax")?;
        let (rows_input, rows, len) = grouped(self, x, &[axis])?;
        let out = GpuBuffer::uninit(self, rows, DType::I64, "argmax")?;
        let op = if max { 3 } else { 4 };
        self.rows_kernel("reduce_rows", &rows_input, (rows, len), op, &out)?;
        Ok(DynTensor::from_gpu(out, out_dims))
    }

    /// Softmax (or log-softmax) along `axis`.
    pub(crate) fn softmax(&self, x: &DynTensor, axis: usize, log: bool) -> Result<DynTensor> {
        self.softmax_kernel("softmax_rows", x, None, axis, log)
    }

    /// The input gradient of softmax (or log-softmax) along `axis` at input `x`, given the
    /// output gradient `grad`; the softmax is recomputed in the kernel.
    pub(crate) fn softmax_backward(
        &self,
        grad: &DynTensor,
        x: &DynTensor,
        axis: usize,
        log: bool,
    ) -> Result<DynTensor> {
        self.softmax_kernel("softmax_backward_rows", x, Some(grad), axis, log)
    }

    /// Each row's log-sum-exp along `axis`, which the result keeps with length 1 (the
    /// softmax's reading pass alone: no tensor of `x`'s size is written).
    pub(crate) fn logsumexp_rows(&self, x: &DynTensor, axis: usize) -> Result<DynTensor> {
        check_float(x.dtype(), "logsumexp")?;
        let (rows_input, rows, len) = grouped(self, x, &[axis])?;
        let out = GpuBuffer::uninit(self, rows, DType::F32, "logsumexp")?;
        self.rows_kernel("logsumexp_rows", &rows_input, (rows, len), 0, &out)?;
        let mut dims = x.dims().to_vec();
        dims[axis] = 1;
        Ok(DynTensor::from_gpu(out, &dims))
    }

    /// Runs a softmax kernel over the rows along `axis` (moved last and made contiguous,
    /// `grad` alike) and restores the axis order of the result.
    fn softmax_kernel(
        &self,
        entry: &'static str,
        x: &DynTensor,
        grad: Option<&DynTensor>,
        axis: usize,
        log: bool,
    ) -> Result<DynTensor> {
        check_float(x.dtype(), "softmax")?;
        if x.numel() == 0 {
            // No rows to normalise (and their sizes may multiply past usize).
            return self.full_tensor(x.dims(), 0.0, DType::F32);
        }
        let (rows_input, rows, len) = grouped(self, x, &[axis])?;
        let grad_rows = grad.map(|g| grouped(self, g, &[axis])).transpose()?;
        check_row_loops(self, entry, len)?;
        let out = GpuBuffer::uninit(self, rows * len, DType::F32, "softmax")?;
        let segment = row_segment(len);
        let (groups, row) = grid_rows(rows.div_ceil(256 / segment));
        let grad_offset = grad_rows.as_ref().map_or(0, |(g, ..)| g.layout().offset());
        let params = [
            rows as u32,
            len as u32,
            u32::from(log),
            row,
            rows_input.layout().offset() as u32,
            segment as u32,
            grad_offset as u32,
        ];
        let input = self.memory_of(&rows_input)?;
        let grad_memory = grad_rows.map(|(g, ..)| self.memory_of(&g)).transpose()?;
        let mut bindings = vec![(1, input.raw()), (2, out.raw())];
        bindings.extend(grad_memory.as_ref().map(|g| (3, g.raw())));
        let groups = if rows == 0 { [0, 0, 0] } else { groups };
        self.dispatch(Module::Reduce, entry, &params, &bindings, groups);
        let last = x.rank() - 1;
        let mut perm: Vec<usize> = (0..x.rank()).filter(|&a| a != axis).collect();
        perm.push(axis);
        let moved_dims: Vec<usize> = perm.iter().map(|&a| x.dims()[a]).collect();
        let moved = DynTensor::from_gpu(out, &moved_dims);
        if axis == last {
            return Ok(moved);
        }
        let inverse = crate::ops::view::inverse_permutation(&perm);
        self.copy_tensor(&moved.view_with(moved.layout().permute(&inverse)))
    }
}
