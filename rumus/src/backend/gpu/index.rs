//! Launchers of `shaders/index.wgsl`: gather, index_select, scatter_add and index_add.

use super::batch::grid_1d;
use super::context::GpuDevice;
use super::elementwise::check_float;
use super::memory::GpuBuffer;
use super::operand::{MAX_RANK, slot};
use super::pipelines::Module;
use crate::error::{DeviceError, Result};
use crate::shape::Layout;
use crate::tensor::DynTensor;

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
fn along_axis(indices: &DynTensor, dims: &[usize], axis: usize) -> Layout {
    let mut strides = vec![0; dims.len()];
    strides[axis] = indices.layout().strides()[0];
    Layout::new(dims, &strides, indices.layout().offset())
}

impl GpuDevice {
    fn gather_view(
        &self,
        src: &DynTensor,
        axis: usize,
        indices: &DynTensor,
        index_layout: &Layout,
        dims: &[usize],
    ) -> Result<DynTensor> {
        let numel = dims.iter().product();
        let out = GpuBuffer::uninit(self, numel, src.dtype(), "gather")?;
        let unused = Layout::contiguous(dims);
        let src_layout = Layout::new(dims, src.layout().strides(), src.layout().offset());
        let (params, groups) = index_params(
            "gather",
            dims,
            axis,
            src.dims()[axis],
            [&src_layout, index_layout, &unused],
        )?;
        let (ms, mi) = (self.memory_of(src)?, self.memory_of(indices)?);
        self.dispatch(
            Module::Index,
            "gather",
            &params,
            &[(1, ms.raw()), (2, mi.raw()), (4, out.raw())],
            groups,
        );
        Ok(DynTensor::from_gpu(out, dims))
    }

    /// `out[p] = src[p with axis := indices[p]]`, shaped like `indices`.
    pub(crate) fn gather(
        &self,
        src: &DynTensor,
        axis: usize,
        indices: &DynTensor,
    ) -> Result<DynTensor> {
        self.gather_view(src, axis, indices, indices.layout(), indices.dims())
    }

    /// The slices `indices` (1-D) of `axis`.
    pub(crate) fn index_select(
        &self,
        src: &DynTensor,
        axis: usize,
        indices: &DynTensor,
    ) -> Result<DynTensor> {
        let mut dims = src.dims().to_vec();
        dims[axis] = indices.numel();
        let view = along_axis(indices, &dims, axis);
        self.gather_view(src, axis, indices, &view, &dims)
    }

    fn scatter_view(
        &self,
        base: &DynTensor,
        axis: usize,
        indices: &DynTensor,
        index_layout: &Layout,
        values: &DynTensor,
    ) -> Result<DynTensor> {
        check_float(base.dtype(), "scatter_add")?;
        let out = self.copy_tensor(base)?;
        let target = self.memory_of(&out)?;
        let dims = values.dims();
        let dst_layout = Layout::new(dims, out.layout().strides(), 0);
        let (params, groups) = index_params(
            "scatter_add",
            dims,
            axis,
            base.dims()[axis],
            [&dst_layout, index_layout, values.layout()],
        )?;
        let (mi, mv) = (self.memory_of(indices)?, self.memory_of(values)?);
        self.dispatch(
            Module::Index,
            "scatter_add",
            &params,
            &[(2, mi.raw()), (3, mv.raw()), (5, target.raw())],
            groups,
        );
        Ok(out)
    }

    /// `base` plus `values[p]` added at `p with axis := indices[p]`.
    pub(crate) fn scatter_add(
        &self,
        base: &DynTensor,
        axis: usize,
        indices: &DynTensor,
        values: &DynTensor,
    ) -> Result<DynTensor> {
        self.scatter_view(base, axis, indices, indices.layout(), values)
    }

    /// `base` plus slice `k` of `values` added at slice `indices[k]` of `axis`.
    pub(crate) fn index_add(
        &self,
        base: &DynTensor,
        axis: usize,
        indices: &DynTensor,
        values: &DynTensor,
    ) -> Result<DynTensor> {
        let view = along_axis(indices, values.dims(), axis);
        self.scatter_view(base, axis, indices, &view, values)
    }
}
