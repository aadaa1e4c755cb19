//! Indexing on CUDA (`shaders/cuda/index.cu`). Indices are checked by the kernels: one out of
//! its axis's range is skipped and raises the device's fault word, an error at the next wait
//! for the device (reading a result, `synchronize`).

use super::context::CudaDevice;
use super::launch::{View, dtype_suffix, views, width_suffix};
use super::memory::CudaBuffer;
use crate::backend::{Index, Pointwise, Src, check_index_dtype};
use crate::dtype::DType;
use crate::error::{DeviceError, Error, Result};
use crate::shape::Layout;

const MODULE: &str = "index";

/// Walking `dims` (the output's or source's), element `e` sits at `(e / inner) % count`
/// along `axis`: `(count, inner)`.
fn along(dims: &[usize], axis: usize) -> (i64, i64) {
    (dims[axis] as i64, dims[axis + 1..].iter().product::<usize>() as i64)
}

/// The view walking `dims` with the strides and offset of `layout` (the indexed tensor's):
/// where each element's partner sits before its axis coordinate is replaced.
fn partner_view(op: &'static str, dims: &[usize], layout: &Layout) -> Result<View> {
    let over = Layout::new(dims, layout.strides(), layout.offset());
    let [view] = views(op, dims, [&over])?;
    Ok(view)
}

impl CudaDevice {
    /// `base` copied, plus `source` added at the indexed places (`per_element`: one index per
    /// source element, else one per slice of `axis`).
    fn add_at(
        &self,
        op: &'static str,
        base: Src<'_, CudaBuffer>,
        axis: usize,
        indices: Src<'_, CudaBuffer>,
        source: Src<'_, CudaBuffer>,
        per_element: bool,
    ) -> Result<CudaBuffer> {
        check_index_dtype(indices.dtype(), op)?;
        if source.dtype() != base.dtype() {
            return Err(Error::DTypeMismatch {
                op,
                lhs: base.dtype(),
                rhs: source.dtype(),
            });
        }
        if !matches!(base.dtype(), DType::F32 | DType::F64) {
            return Err(DeviceError::UnsupportedDType {
                op,
                dtype: base.dtype(),
            }
            .into());
        }
        let out = self.copy(base)?;
        let out_layout = Layout::contiguous(base.dims());
        let (count, inner) = along(source.dims(), axis);
        let vo = partner_view(op, source.dims(), &out_layout)?;
        let [vi] = views(op, indices.dims(), [indices.layout])?;
        let [vs] = views(op, source.dims(), [source.layout])?;
        let kernel = self.kernel(MODULE, "add_at", [dtype_suffix(base.dtype()), ""])?;
        let n = source.numel();
        let (o, axis_stride, pi, per, ps, size, n64, fault) = (
            out.address(0),
            out_layout.strides()[axis] as i64,
            indices.memory.address(0),
            i32::from(per_element),
            source.memory.address(0),
            base.dims()[axis] as i64,
            n as i64,
            self.fault_word(),
        );
        self.launch_elements(
            kernel,
            n,
            &[
                &o, &vo, &axis_stride, &pi, &vi, &per, &ps, &vs, &count, &inner, &size, &n64,
                &fault,
            ],
        )?;
        Ok(out)
    }

    /// The elements of `x` the indices pick, shaped `out_dims` (`per_element`: one index per
    /// output element, else one per slice of `axis`).
    fn pick(
        &self,
        op: &'static str,
        x: Src<'_, CudaBuffer>,
        axis: usize,
        indices: Src<'_, CudaBuffer>,
        out_dims: &[usize],
        per_element: bool,
    ) -> Result<CudaBuffer> {
        check_index_dtype(indices.dtype(), op)?;
        let n: usize = out_dims.iter().product();
        let out = CudaBuffer::uninit(self, n, x.dtype())?;
        let (count, inner) = along(out_dims, axis);
        let vx = partner_view(op, out_dims, x.layout)?;
        let [vi] = views(op, indices.dims(), [indices.layout])?;
        let kernel = self.kernel(MODULE, "pick", [width_suffix(x.dtype()), ""])?;
        let (o, px, axis_stride, pi, per, size, n64, fault) = (
            out.address(0),
            x.memory.address(0),
            x.layout.strides()[axis] as i64,
            indices.memory.address(0),
            i32::from(per_element),
            x.dims()[axis] as i64,
            n as i64,
            self.fault_word(),
        );
        self.launch_elements(
            kernel,
            n,
            &[
                &o, &px, &vx, &axis_stride, &pi, &vi, &per, &count, &inner, &size, &n64, &fault,
            ],
        )?;
        Ok(out)
    }
}

impl Index for CudaDevice {
    fn index_select(
        &self,
        x: Src<'_, CudaBuffer>,
        axis: usize,
        indices: Src<'_, CudaBuffer>,
    ) -> Result<CudaBuffer> {
        let mut dims = x.dims().to_vec();
        dims[axis] = indices.numel();
        self.pick("index_select", x, axis, indices, &dims, false)
    }

    fn gather(
        &self,
        x: Src<'_, CudaBuffer>,
        axis: usize,
        indices: Src<'_, CudaBuffer>,
    ) -> Result<CudaBuffer> {
        self.pick("gather", x, axis, indices, indices.dims(), true)
    }

    fn index_add(
        &self,
        base: Src<'_, CudaBuffer>,
        axis: usize,
        indices: Src<'_, CudaBuffer>,
        source: Src<'_, CudaBuffer>,
    ) -> Result<CudaBuffer> {
        self.add_at("index_add", base, axis, indices, source, false)
    }

    fn scatter_add(
        &self,
        base: Src<'_, CudaBuffer>,
        axis: usize,
        indices: Src<'_, CudaBuffer>,
        source: Src<'_, CudaBuffer>,
    ) -> Result<CudaBuffer> {
        self.add_at("scatter_add", base, axis, indices, source, true)
    }
}
