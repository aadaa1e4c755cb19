//! Launchers of `shaders/index.wgsl`: gather, index_select, scatter_add and index_add; the
//! wgpu side of the [`Index`] contract.

use super::batch::grid_1d;
use super::context::GpuDevice;
use super::elementwise::check_float;
use super::memory::{GpuBuffer, check_words};
use super::operand::{MAX_RANK, slot};
use super::pipelines::Module;
use crate::backend::{Pointwise, Index, Src, check_index_dtype};
use crate::error::{DeviceError, Result};
use crate::shape::Layout;

/// Parameters for iterating over `dims` with the indexed tensor, the index and the values
/// viewed by `layouts` (axis `axis` of the indexed tensor is replaced by the index).
fn index_params(
    op: &'static str,
    dims: &[usize],
    axis: usize,
    axis_size: usize,
    layouts: [&Layout; 3],
) -> Result<(Vec<u32>, [u32; 3])> {
    if dims.len() > MAX_RANK {
        return Err(DeviceError::RankTooLarge {
            op,
            rank: dims.len(),
            limit: MAX_RANK,
        }
        .into());
    }
    let numel: usize = dims.iter().product();
    let (groups, row) = grid_1d(numel);
    let mut p = vec![0u32; slot::OFFSETS + 4];
    p[slot::NUMEL] = numel as u32;
    p[slot::RANK] = dims.len() as u32;
    p[slot::OP] = axis as u32;
    p[slot::ROW] = row;
    for (d, &size) in dims.iter().enumerate() {
        p[slot::DIMS + d] = size as u32;
        for (k, layout) in layouts.iter().enumerate() {
            p[slot::STRIDES + 8 * k + d] = layout.strides()[d] as u32;
        }
    }
    for (k, layout) in layouts.iter().enumerate() {
        p[slot::OFFSETS + k] = layout.offset() as u32;
    }
    p[slot::OFFSETS + 3] = axis_size as u32;
    let groups = if numel == 0 { [0, 0, 0] } else { groups };
    Ok((p, groups))
}

/// A 1-D index viewed over `dims`: its stride on `axis`, 0 elsewhere.
fn along_axis(indices: &Layout, dims: &[usize], axis: usize) -> Layout {
    let mut strides = vec![0; dims.len()];
    strides[axis] = indices.strides()[0];
    Layout::new(dims, &strides, indices.offset())
}

/// Both operands' dtypes readable by the index kernels (one element per 32-bit word).
fn check_operands(op: &'static str, x: Src<'_, GpuBuffer>, indices: Src<'_, GpuBuffer>) -> Result<()> {
    check_index_dtype(indices.dtype(), op)?;
    check_words(x.dtype(), "GPU kernel")?;
    check_words(indices.dtype(), "GPU kernel")
}

impl Index for GpuDevice {
    fn index_select(
        &self,
        x: Src<'_, GpuBuffer>,
        axis: usize,
        indices: Src<'_, GpuBuffer>,
    ) -> Result<GpuBuffer> {
        check_operands("index_select", x, indices)?;
        let mut dims = x.dims().to_vec();
        dims[axis] = indices.numel();
        let view = along_axis(indices.layout, &dims, axis);
        self.gather_view(x, axis, Src::new(indices.memory, &view), &dims)
    }

    fn gather(
        &self,
        x: Src<'_, GpuBuffer>,
        axis: usize,
        indices: Src<'_, GpuBuffer>,
    ) -> Result<GpuBuffer> {
        check_operands("gather", x, indices)?;
        self.gather_view(x, axis, indices, indices.dims())
    }

    fn index_add(
        &self,
        base: Src<'_, GpuBuffer>,
        axis: usize,
        indices: Src<'_, GpuBuffer>,
        source: Src<'_, GpuBuffer>,
    ) -> Result<GpuBuffer> {
        check_index_dtype(indices.dtype(), "index_add")?;
        let view = along_axis(indices.layout, source.dims(), axis);
        self.scatter_view(base, axis, Src::new(indices.memory, &view), source)
    }

    fn scatter_add(
        &self,
        base: Src<'_, GpuBuffer>,
        axis: usize,
        indices: Src<'_, GpuBuffer>,
        source: Src<'_, GpuBuffer>,
    ) -> Result<GpuBuffer> {
        check_index_dtype(indices.dtype(), "scatter_add")?;
        self.scatter_view(base, axis, indices, source)
    }
}

impl GpuDevice {
    /// `out[p] = x[p with axis := index[p]]` over `dims`, the index read through its layout.
    fn gather_view(
        &self,
        x: Src<'_, GpuBuffer>,
        axis: usize,
        index: Src<'_, GpuBuffer>,
        dims: &[usize],
    ) -> Result<GpuBuffer> {
        let numel = dims.iter().product();
        let out = GpuBuffer::uninit(self, numel, x.dtype(), "gather")?;
        let unused = Layout::contiguous(dims);
        let src_layout = Layout::new(dims, x.layout.strides(), x.layout.offset());
        let (params, groups) = index_params(
            "gather",
            dims,
            axis,
            x.dims()[axis],
            [&src_layout, index.layout, &unused],
        )?;
        self.dispatch(
            Module::Index,
            "gather",
            &params,
            &[(1, x.memory.raw()), (2, index.memory.raw()), (4, out.raw())],
            groups,
        );
        Ok(out)
    }

    /// A contiguous copy of `base` with `values[p]` added at `p with axis := index[p]`, the
    /// index read through its layout over `values`' dims.
    fn scatter_view(
        &self,
        base: Src<'_, GpuBuffer>,
        axis: usize,
        index: Src<'_, GpuBuffer>,
        values: Src<'_, GpuBuffer>,
    ) -> Result<GpuBuffer> {
        check_float(base.dtype(), "scatter_add")?;
        let out = self.copy(base)?;
        let dims = values.dims();
        let base_strides = crate::shape::contiguous_strides(base.dims());
        let dst_layout = Layout::new(dims, &base_strides[..], 0);
        let (params, groups) = index_params(
            "scatter_add",
            dims,
            axis,
            base.dims()[axis],
            [&dst_layout, index.layout, values.layout],
        )?;
        check_words(index.dtype(), "GPU kernel")?;
        check_words(values.dtype(), "GPU kernel")?;
        self.dispatch(
            Module::Index,
            "scatter_add",
            &params,
            &[
                (2, index.memory.raw()),
                (3, values.memory.raw()),
                (5, out.raw()),
            ],
            groups,
        );
        Ok(out)
    }
}
