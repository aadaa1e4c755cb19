//! Layer normalisation on CUDA (`shaders/cuda/norm.cu`): the forward pass and the input's
//! gradient one block per row; the weight's and bias's gradients are sums over the rows,
//! taken by the reduction kernel.

use super::context::CudaDevice;
use super::launch::Arg;
use super::memory::CudaBuffer;
use super::reduce::split;
use crate::backend::kinds::Reduction;
use crate::backend::{Norm, Reduce, Src};
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Layout;

/// A vector operand as the kernels read it: its address at the offset and its stride (the
/// address of `x` and stride 0 when absent: the flags keep the kernel off it).
fn vector(v: Option<Src<'_, CudaBuffer>>, x: &Src<'_, CudaBuffer>) -> (u64, i64) {
    match v {
        Some(v) => (
            v.memory.address(v.layout.offset()),
            v.layout.strides().first().map_or(0, |&s| s as i64),
        ),
        None => (x.memory.address(0), 0),
    }
}

impl Norm for CudaDevice {
    fn layer_norm(
        &self,
        x: Src<'_, CudaBuffer>,
        weight: Option<Src<'_, CudaBuffer>>,
        bias: Option<Src<'_, CudaBuffer>>,
        eps: f64,
    ) -> Result<Option<(CudaBuffer, CudaBuffer)>> {
        if !matches!(x.dtype(), DType::F32 | DType::F64) {
            return Ok(None);
        }
        let last = x.dims().len() - 1;
        let (rows, outputs, _, n) = split("layer_norm", x.layout, &[last])?;
        let out = CudaBuffer::uninit(self, x.numel(), x.dtype())?;
        let stats = CudaBuffer::uninit(self, outputs * 2, x.dtype())?;
        let ((pw, w_stride), (pb, b_stride)) = (vector(weight, &x), vector(bias, &x));
        let (o, ps, px, stride, outputs64, n64, has_w, has_b) = (
            out.address(0),
            stats.address(0),
            x.memory.address(0),
            x.layout.strides()[last] as i64,
            outputs as i64,
            n as i64,
            i32::from(weight.is_some()),
            i32::from(bias.is_some()),
        );
        let args: [&dyn Arg; 14] = [
            &o, &ps, &px, &rows, &stride, &pw, &w_stride, &pb, &b_stride, &outputs64, &n64, &eps,
            &has_w, &has_b,
        ];
        self.launch_rows("layer_norm", x.dtype(), outputs, &args)?;
        Ok(Some((out, stats)))
    }

    fn layer_norm_backward(
        &self,
        grad: Src<'_, CudaBuffer>,
        x: Src<'_, CudaBuffer>,
        weight: Option<Src<'_, CudaBuffer>>,
        stats: Src<'_, CudaBuffer>,
        [want_x, want_w, want_b]: [bool; 3],
    ) -> Result<[Option<CudaBuffer>; 3]> {
        let last = x.dims().len() - 1;
        let (xrows, outputs, _, n) = split("layer_norm", x.layout, &[last])?;
        let (grows, _, _, _) = split("layer_norm", grad.layout, &[last])?;
        let matrix = Layout::contiguous(&[outputs, n]);
        let rows_of_grad = Layout::new(
            &[outputs, n],
            &[n * grad.layout.strides()[last], grad.layout.strides()[last]],
            grad.layout.offset(),
        );
        let db = if want_b && grad.layout.is_contiguous() {
            Some(self.reduce(Src::new(grad.memory, &rows_of_grad), &[0], Reduction::Sum)?)
        } else if want_b {
            let packed = crate::backend::Pointwise::copy(self, grad)?;
            Some(self.reduce(Src::new(&packed, &matrix), &[0], Reduction::Sum)?)
        } else {
            None
        };
        if !want_x && !want_w {
            return Ok([None, None, db]);
        }
        let dx = CudaBuffer::uninit(self, if want_x { x.numel() } else { 0 }, x.dtype())?;
        let scaled = CudaBuffer::uninit(self, if want_w { x.numel() } else { 0 }, x.dtype())?;
        let packed_stats = if stats.layout.is_contiguous() {
            None
        } else {
            Some(crate::backend::Pointwise::copy(self, stats)?)
        };
        let stats_address = match &packed_stats {
            Some(packed) => packed.address(0),
            None => stats.memory.address(stats.layout.offset()),
        };
        let (pw, w_stride) = vector(weight, &x);
        let (pdx, pscaled, pg, g_stride, px, x_stride, outputs64, n64) = (
            dx.address(0),
            scaled.address(0),
            grad.memory.address(0),
            grad.layout.strides()[last] as i64,
            x.memory.address(0),
            x.layout.strides()[last] as i64,
            outputs as i64,
            n as i64,
        );
        let (has_w, want_x32, want_w32) = (
            i32::from(weight.is_some()),
            i32::from(want_x),
            i32::from(want_w),
        );
        let args: [&dyn Arg; 16] = [
            &pdx, &pscaled, &pg, &grows, &g_stride, &px, &xrows, &x_stride, &pw, &w_stride,
            &stats_address, &outputs64, &n64, &has_w, &want_x32, &want_w32,
        ];
        self.launch_rows("layer_norm_backward", x.dtype(), outputs, &args)?;
        let dw = if want_w {
            Some(self.reduce(Src::new(&scaled, &matrix), &[0], Reduction::Sum)?)
        } else {
            None
        };
        Ok([want_x.then_some(dx), dw, db])
    }
}
