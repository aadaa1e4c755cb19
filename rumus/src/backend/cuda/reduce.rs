//! Reductions on CUDA (`shaders/cuda/reduce.cu`): one block of threads per output, each
//! output's group read through a strided view, so no operand is copied first.

use super::context::CudaDevice;
use super::launch::{check_floating, View, dtype_suffix, views};
use super::memory::CudaBuffer;
use crate::backend::kinds::{Reduction, softmax_name};
use crate::backend::{Reduce, Src};
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Layout;

const MODULE: &str = "reduce";

/// Threads per block of the reductions (`REDUCE_THREADS`, and `COLUMNS x LANES`).
const THREADS: u32 = 256;

/// Outputs per block of the reduction over leading axes (`COLUMNS`).
const COLUMNS: usize = 32;

/// Blocks that keep every multiprocessor of a large GPU busy (an H100 has 132): a reduction
/// with fewer work items (a loss summed to one number: one; a bias gradient of width 512: 16)
/// cuts each group into pieces, reduced side by side and then combined. Measured on an H100,
/// one block summing a transformer's 4M-element loss took milliseconds.
const BUSY_BLOCKS: usize = 1024;
/// Groups up to this long get a warp each instead of a block, where there are many of them:
/// a block of 256 threads summing rows of 64 (attention's backward pass, once per layer)
/// left three quarters of its threads idle and took 30% of a transformer step's kernel time
/// under bf16 autocast on an H100.
const WARP_GROUP: usize = 256;
/// Elements a row block's piece has at least (eight per thread).
const MIN_ROW_PIECE: usize = 2048;
/// Rows a column block's piece has at least (32 per lane of threads).
const MIN_COLUMN_PIECE: usize = 256;

/// How many pieces each of `items` work items' groups of `size` is cut into.
fn pieces(items: usize, size: usize, min_piece: usize) -> usize {
    if items >= BUSY_BLOCKS {
        return 1;
    }
    BUSY_BLOCKS
        .div_ceil(items.max(1))
        .min(size / min_piece)
        .clamp(1, 1024)
}

/// The code `reduce.cu` switches on for `kind` (its place in this list, which
/// `compile.rs` writes as `REDUCTION_SUM`, ...).
pub(super) const REDUCTIONS: [Reduction; 3] = [Reduction::Sum, Reduction::Max, Reduction::Min];

fn reduction_code(kind: Reduction) -> i32 {
    REDUCTIONS
        .iter()
        .position(|k| *k == kind)
        .expect("every reduction is listed") as i32
}

/// `layout` split into the view over the axes not in `axes` (with its offset) and the view
/// over `axes` (offset 0), as the kernels walk them.
pub(super) fn split(
    op: &'static str,
    layout: &Layout,
    axes: &[usize],
) -> Result<(View, usize, View, usize)> {
    let (mut kept, mut kept_strides, mut group, mut group_strides) = (vec![], vec![], vec![], vec![]);
    for (axis, (&size, &stride)) in layout.dims().iter().zip(layout.strides()).enumerate() {
        if axes.contains(&axis) {
            group.push(size);
            group_strides.push(stride);
        } else {
            kept.push(size);
            kept_strides.push(stride);
        }
    }
    let kept_layout = Layout::new(&kept, &kept_strides, layout.offset());
    let group_layout = Layout::new(&group, &group_strides, 0);
    let [kept_view] = views(op, &kept, [&kept_layout])?;
    let [group_view] = views(op, &group, [&group_layout])?;
    Ok((
        kept_view,
        kept.iter().product(),
        group_view,
        group.iter().product(),
    ))
}


/// The module of a row kernel.
fn module_of(kernel: &str) -> &'static str {
    if kernel.starts_with("layer_norm") {
        "norm"
    } else {
        MODULE
    }
}

impl CudaDevice {
    /// Queues a row kernel (of reduce.cu or norm.cu): one block per output, blocks striding
    /// over the outputs.
    pub(super) fn launch_rows(
        &self,
        kernel: &'static str,
        dtype: DType,
        outputs: usize,
        args: &[&dyn super::launch::Arg],
    ) -> Result<()> {
        if outputs == 0 {
            return Ok(());
        }
        let kernel = self.kernel(module_of(kernel), kernel, [dtype_suffix(dtype), ""])?;
        let blocks = outputs.min(65_535) as u32;
        self.launch(kernel, (blocks, 1, 1), (THREADS, 1, 1), 0, args)
    }
}

impl Reduce for CudaDevice {
    fn reduce(&self, x: Src<'_, CudaBuffer>, axes: &[usize], kind: Reduction) -> Result<CudaBuffer> {
        check_floating(kind.name(), x.dtype())?;
        let (kept, outputs, group, size) = split(kind.name(), x.layout, axes)?;
        let out = CudaBuffer::uninit(self, outputs, x.dtype())?;
        if outputs == 0 {
            return Ok(out);
        }
        let (o, px, outputs64, size64, code) = (
            out.address(0),
            x.memory.address(0),
            outputs as i64,
            size as i64,
            reduction_code(kind),
        );
        // Neighbouring outputs next to each other in memory (the leading axes reduced):
        // blocks of 32 outputs, so that warps read neighbouring elements.
        let columns = kept.innermost_stride() == 1 && outputs > 1;
        // Work items: a block per output, or per 32 neighbouring outputs.
        let (items, min_piece) = if columns {
            (outputs.div_ceil(COLUMNS), MIN_COLUMN_PIECE)
        } else {
            (outputs, MIN_ROW_PIECE)
        };
        let parts = pieces(items, size, min_piece);
        // Many short groups: a warp per output (8 to a block of 256 threads).
        let warps = !columns && size <= WARP_GROUP && outputs >= BUSY_BLOCKS;
        let mode = if warps { 2 } else { i32::from(columns) };
        if parts == 1 {
            let kernel = self.kernel(MODULE, "reduce", [dtype_suffix(x.dtype()), ""])?;
            let args: [&dyn super::launch::Arg; 8] =
                [&o, &px, &kept, &group, &outputs64, &size64, &code, &mode];
            let blocks = if warps { items.div_ceil(8) } else { items }.min(65_535) as u32;
            self.launch(kernel, (blocks, 1, 1), (THREADS, 1, 1), 0, &args)?;
            return Ok(out);
        }
        // Partial results at the accumulator's width, then one pass combining them.
        let wide = if x.dtype() == DType::F64 { DType::F64 } else { DType::F32 };
        let partial = CudaBuffer::uninit(self, outputs * parts, wide)?;
        let (pp, parts64) = (partial.address(0), parts as i64);
        let kernel = self.kernel(MODULE, "reduce_parts", [dtype_suffix(x.dtype()), ""])?;
        let args: [&dyn super::launch::Arg; 9] = [
            &pp, &px, &kept, &group, &outputs64, &size64, &code, &mode, &parts64,
        ];
        let blocks = (items * parts).min(65_535) as u32;
        self.launch(kernel, (blocks, 1, 1), (THREADS, 1, 1), 0, &args)?;
        let finish = self.kernel(MODULE, "reduce_finish", [dtype_suffix(x.dtype()), ""])?;
        self.launch_elements(finish, outputs, &[&o, &pp, &outputs64, &parts64, &code])?;
        Ok(out)
    }

    fn arg_reduce(&self, x: Src<'_, CudaBuffer>, axis: usize, max: bool) -> Result<CudaBuffer> {
        let op = if max { "argmax" } else { "argmin" };
        check_floating(op, x.dtype())?;
        let (kept, outputs, _, size) = split(op, x.layout, &[axis])?;
        let out = CudaBuffer::uninit(self, outputs, DType::I64)?;
        let (o, px, outputs64, size64, stride, max) = (
            out.address(0),
            x.memory.address(0),
            outputs as i64,
            size as i64,
            x.layout.strides()[axis] as i64,
            i32::from(max),
        );
        self.launch_rows(
            "arg_reduce",
            x.dtype(),
            outputs,
            &[&o, &px, &kept, &outputs64, &size64, &stride, &max],
        )?;
        Ok(out)
    }

    fn softmax(&self, x: Src<'_, CudaBuffer>, log: bool) -> Result<CudaBuffer> {
        let op = softmax_name(log);
        check_floating(op, x.dtype())?;
        let last = x.dims().len() - 1;
        let (rows, outputs, _, size) = split(op, x.layout, &[last])?;
        let out = CudaBuffer::uninit(self, x.numel(), x.dtype())?;
        let (o, px, outputs64, size64, stride, log) = (
            out.address(0),
            x.memory.address(0),
            outputs as i64,
            size as i64,
            x.layout.strides()[last] as i64,
            i32::from(log),
        );
        self.launch_rows(
            "softmax",
            x.dtype(),
            outputs,
            &[&o, &px, &rows, &outputs64, &size64, &stride, &log],
        )?;
        Ok(out)
    }

    fn softmax_backward(
        &self,
        grad: Src<'_, CudaBuffer>,
        x: Src<'_, CudaBuffer>,
        log: bool,
    ) -> Result<CudaBuffer> {
        let op = softmax_name(log);
        check_floating(op, x.dtype())?;
        let last = x.dims().len() - 1;
        let (xrows, outputs, _, size) = split(op, x.layout, &[last])?;
        let (grows, _, _, _) = split(op, grad.layout, &[last])?;
        let out = CudaBuffer::uninit(self, x.numel(), x.dtype())?;
        let (o, pg, gstride, px, xstride, outputs64, size64, log) = (
            out.address(0),
            grad.memory.address(0),
            grad.layout.strides()[last] as i64,
            x.memory.address(0),
            x.layout.strides()[last] as i64,
            outputs as i64,
            size as i64,
            i32::from(log),
        );
        self.launch_rows(
            "softmax_backward",
            x.dtype(),
            outputs,
            &[
                &o, &pg, &grows, &gstride, &px, &xrows, &xstride, &outputs64, &size64, &log,
            ],
        )?;
        Ok(out)
    }

    fn logsumexp_rows(&self, x: Src<'_, CudaBuffer>, axis: usize) -> Result<CudaBuffer> {
        check_floating("logsumexp", x.dtype())?;
        let (rows, outputs, _, size) = split("logsumexp", x.layout, &[axis])?;
        let out = CudaBuffer::uninit(self, outputs, x.dtype())?;
        let (o, px, outputs64, size64, stride) = (
            out.address(0),
            x.memory.address(0),
            outputs as i64,
            size as i64,
            x.layout.strides()[axis] as i64,
        );
        self.launch_rows(
            "logsumexp",
            x.dtype(),
            outputs,
            &[&o, &px, &rows, &outputs64, &size64, &stride],
        )?;
        Ok(out)
    }
}
