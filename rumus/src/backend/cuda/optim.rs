//! In-place updates and the fused optimizer steps on CUDA (`shaders/cuda/optim.cu`), and
//! joining (`cat`), which writes each part into its slice of the result the same way.

use super::context::CudaDevice;
use super::launch::{check_floating, dtype_suffix, views, width_suffix};
use super::memory::CudaBuffer;
use crate::backend::kinds::AdamScalars;
use crate::backend::{Dst, Join, Optim, Src, Update};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::shape::Layout;

const MODULE: &str = "optim";

impl CudaDevice {
    /// `dst = src` element by element, each through its view (any dtype, both the same).
    fn assign(&self, dst: (&CudaBuffer, &Layout), src: Src<'_, CudaBuffer>) -> Result<()> {
        let (memory, layout) = dst;
        let n = layout.numel();
        let [vd, vs] = views("copy_", layout.dims(), [layout, src.layout])?;
        let kernel = self.kernel(MODULE, "assign", [width_suffix(src.dtype()), ""])?;
        let (pd, ps, n64) = (memory.address(0), src.memory.address(0), n as i64);
        self.launch_elements(kernel, n, &[&pd, &vd, &ps, &vs, &n64])
    }
}

impl Update for CudaDevice {
    fn scale_add(
        &self,
        dst: Dst<'_, CudaBuffer>,
        src: Src<'_, CudaBuffer>,
        scale: f64,
        alpha: f64,
    ) -> Result<()> {
        const OP: &str = "in-place update";
        if dst.memory.dtype() != src.dtype() || check_floating(OP, src.dtype()).is_err() {
            return Err(Error::DType {
                op: OP,
                expected: "a floating-point tensor",
                found: dst.memory.dtype(),
            });
        }
        let n = dst.layout.numel();
        let [vd, vs] = views(OP, dst.layout.dims(), [dst.layout, src.layout])?;
        let kernel = self.kernel(MODULE, "scale_add", [dtype_suffix(src.dtype()), ""])?;
        let (pd, ps, n64) = (dst.memory.address(0), src.memory.address(0), n as i64);
        self.launch_elements(kernel, n, &[&pd, &vd, &ps, &vs, &n64, &scale, &alpha])
    }

    fn copy_into(&self, dst: Dst<'_, CudaBuffer>, src: Src<'_, CudaBuffer>) -> Result<()> {
        if dst.memory.dtype() != src.dtype() {
            return Err(Error::DTypeMismatch {
                op: "copy_",
                lhs: dst.memory.dtype(),
                rhs: src.dtype(),
            });
        }
        self.assign((dst.memory, dst.layout), src)
    }
}

impl Join for CudaDevice {
    fn cat(&self, parts: &[Src<'_, CudaBuffer>], axis: usize, dims: &[usize]) -> Result<CudaBuffer> {
        let dtype = parts.first().map_or(DType::F32, |p| p.dtype());
        if let Some(other) = parts.iter().find(|p| p.dtype() != dtype) {
            return Err(Error::DTypeMismatch {
                op: "cat",
                lhs: dtype,
                rhs: other.dtype(),
            });
        }
        let out = CudaBuffer::uninit(self, dims.iter().product(), dtype)?;
        let whole = Layout::contiguous(dims);
        let mut start = 0;
        for part in parts {
            let len = part.dims()[axis];
            self.assign((&out, &whole.narrow(axis, start, len)), *part)?;
            start += len;
        }
        Ok(out)
    }
}

impl Optim for CudaDevice {
    fn adam_step(
        &self,
        [p, m, v]: [Dst<'_, CudaBuffer>; 3],
        g: Src<'_, CudaBuffer>,
        s: AdamScalars<f64>,
    ) -> Result<bool> {
        let dtype = g.dtype();
        let contiguous = [p.layout, m.layout, v.layout, g.layout]
            .iter()
            .all(|l| l.is_contiguous());
        let same = [&*p.memory, &*m.memory, &*v.memory]
            .iter()
            .all(|b| b.dtype() == dtype);
        if !contiguous || !same || !matches!(dtype, DType::F32 | DType::F64) {
            return Ok(false);
        }
        let n = g.numel();
        let kernel = self.kernel(MODULE, "adam", [dtype_suffix(dtype), ""])?;
        let at = |memory: &CudaBuffer, layout: &Layout| memory.address(layout.offset());
        let (pp, pm, pv, pg, n64) = (
            at(p.memory, p.layout),
            at(m.memory, m.layout),
            at(v.memory, v.layout),
            at(g.memory, g.layout),
            n as i64,
        );
        self.launch_elements(
            kernel,
            n,
            &[
                &pp,
                &pm,
                &pv,
                &pg,
                &n64,
                &s.step_size,
                &s.beta1,
                &s.beta2,
                &s.eps,
                &s.inv_sqrt_correction2,
                &s.l2,
                &s.decay,
            ],
        )?;
        Ok(true)
    }

    fn unscale_flagging_non_finite(
        &self,
        g: Src<'_, CudaBuffer>,
        scale: f64,
        flag: Dst<'_, CudaBuffer>,
    ) -> Result<Option<CudaBuffer>> {
        if g.dtype() != DType::F32 || flag.memory.dtype() != DType::I64 {
            return Ok(None);
        }
        let n = g.numel();
        let out = CudaBuffer::uninit(self, n, DType::F32)?;
        let [vg] = views("GradScaler::unscale", g.dims(), [g.layout])?;
        let kernel = self.kernel(MODULE, "unscale", ["", ""])?;
        let (o, pg, n64, scale, pf) = (
            out.address(0),
            g.memory.address(0),
            n as i64,
            scale as f32,
            flag.memory.address(flag.layout.offset()),
        );
        self.launch_elements(kernel, n, &[&o, &pg, &vg, &n64, &scale, &pf])?;
        Ok(Some(out))
    }
}
