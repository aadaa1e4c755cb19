//! In-place updates by `shaders/elementwise.wgsl`'s `scale_add` kernel (the wgpu side of the
//! [`Update`] contract), and `cat` ([`Join`]), which writes each part into its slice of the
//! result with the same kernel.

use super::context::GpuDevice;
use super::elementwise::check_float;
use super::memory::{GpuBuffer, check_words};
use super::operand::{Strided, slot, spread_params};
use super::pipelines::Module;
use crate::backend::{Dst, Join, Src, Update};
use crate::error::Result;
use crate::shape::Layout;

/// The kernel's flags: the update `dst * scale + alpha * src`, the same with the old values
/// ignored (`scale == 0`), a plain copy of any dtype.
const SCALE_ADD: u32 = 0;
const OVERWRITE: u32 = 1;
const COPY: u32 = 2;

impl Update for GpuDevice {
    fn scale_add(
        &self,
        dst: Dst<'_, GpuBuffer>,
        src: Src<'_, GpuBuffer>,
        scale: f64,
        alpha: f64,
    ) -> Result<()> {
        check_float(dst.memory.dtype(), "in-place update")?;
        let flags = if scale == 0.0 { OVERWRITE } else { SCALE_ADD };
        self.update(dst.memory, dst.layout, src, (scale, alpha), flags)
    }

    fn copy_into(&self, dst: Dst<'_, GpuBuffer>, src: Src<'_, GpuBuffer>) -> Result<()> {
        self.update(dst.memory, dst.layout, src, (0.0, 1.0), COPY)
    }
}

impl Join for GpuDevice {
    fn cat(&self, parts: &[Src<'_, GpuBuffer>], axis: usize, dims: &[usize]) -> Result<GpuBuffer> {
        let dtype = parts[0].dtype();
        let numel = crate::shape::checked_numel(dims, "cat")?;
        let out = GpuBuffer::uninit(self, numel, dtype, "cat")?;
        let whole = Layout::contiguous(dims);
        let mut start = 0;
        for &part in parts {
            let len = part.dims()[axis];
            let slice = whole.narrow(axis, start, len);
            self.update(&out, &slice, part, (0.0, 1.0), COPY)?;
            start += len;
        }
        Ok(out)
    }
}

impl GpuDevice {
    /// Writes the view `layout` of `dst` from `src` (viewed with the same dims). The kernel
    /// writes `dst` through a shared handle; the caller holds the right to write it.
    fn update(
        &self,
        dst: &GpuBuffer,
        layout: &Layout,
        src: Src<'_, GpuBuffer>,
        (scale, alpha): (f64, f64),
        flags: u32,
    ) -> Result<()> {
        check_words(dst.dtype(), "GPU kernel")?;
        let dims = layout.dims();
        let numel = layout.numel();
        // Operand slots: 0 the source, 3 the destination view (slots 1-2 unused).
        let unused = Layout::contiguous(dims);
        let strided = Strided::new("in-place update", dims, &[src.layout, &unused, &unused, layout])?;
        check_words(src.dtype(), "GPU kernel")?;
        let (mut params, groups) = spread_params(&strided, numel);
        params[slot::FLAGS] = flags;
        params[slot::SCALAR0] = (scale as f32).to_bits();
        params[slot::SCALAR1] = (alpha as f32).to_bits();
        self.dispatch(
            Module::Elementwise,
            "scale_add",
            &params,
            &[(1, src.memory.raw()), (4, dst.raw())],
            groups,
        );
        Ok(())
    }
}
