//! The element-wise family on CUDA: `shaders/cuda/elementwise.cu`, one entry point per
//! dtype, every operand read through its strided view.

use super::context::CudaDevice;
use super::launch::{check_floating, dtype_suffix, views, width_suffix};
use super::memory::CudaBuffer;
use crate::backend::kinds::{BinaryOp, CompareOp, DropoutDraws, UnaryOp};
use crate::backend::{Pointwise, Src};
use crate::dtype::DType;
use crate::error::{Error, Result};

const MODULE: &str = "elementwise";

/// The scalars an op carries, as the kernels' `p0` and `p1`.
fn scalars(op: UnaryOp) -> (f64, f64) {
    match op {
        UnaryOp::LeakyRelu(slope) => (slope, 0.0),
        UnaryOp::Softplus { beta, threshold } => (beta, threshold),
        UnaryOp::Powf(p) => (p, 0.0),
        UnaryOp::Clamp { min, max } => (min, max),
        UnaryOp::AddScalar(s) | UnaryOp::MulScalar(s) => (s, 0.0),
        _ => (0.0, 0.0),
    }
}

/// The draws that keep an element: at or above this (as backend/cpu/dropout.rs decides).
fn keep_threshold(draws: DropoutDraws) -> u32 {
    crate::backend::cpu::dropout::threshold(draws.p)
}


fn same_dtype(op: &'static str, a: DType, b: DType) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(Error::DTypeMismatch { op, lhs: a, rhs: b })
    }
}

impl Pointwise for CudaDevice {
    fn unary(&self, x: Src<'_, CudaBuffer>, op: UnaryOp) -> Result<CudaBuffer> {
        check_floating(op.name(), x.dtype())?;
        let n = x.numel();
        let out = CudaBuffer::uninit(self, n, x.dtype())?;
        let [vx] = views(op.name(), x.dims(), [x.layout])?;
        let kernel = self.kernel(MODULE, "unary", [dtype_suffix(x.dtype()), ""])?;
        let (p0, p1) = scalars(op);
        let code = op.code() as i32;
        let (out_ptr, x_ptr, n64) = (out.address(0), x.memory.address(0), n as i64);
        self.launch_elements(kernel, n, &[&out_ptr, &x_ptr, &vx, &n64, &code, &p0, &p1])?;
        Ok(out)
    }

    fn activation_grad(
        &self,
        grad: Src<'_, CudaBuffer>,
        x: Src<'_, CudaBuffer>,
        op: UnaryOp,
        draws: Option<DropoutDraws>,
    ) -> Result<Option<CudaBuffer>> {
        if !op.gradient_in_one_pass() || check_floating(op.name(), x.dtype()).is_err() || grad.dtype() != x.dtype() {
            return Ok(None);
        }
        let n = x.numel();
        let out = CudaBuffer::uninit(self, n, x.dtype())?;
        let [vg, vx] = views(op.name(), x.dims(), [grad.layout, x.layout])?;
        let kernel = self.kernel(
            MODULE,
            "activation_grad", [dtype_suffix(x.dtype()), ""],
        )?;
        let (slope, _) = scalars(op);
        let (dropped, threshold, scale, seed) = match draws {
            Some(d) => (1i32, keep_threshold(d), d.scale, d.seed),
            None => (0, 0, 1.0, 0),
        };
        let code = op.code() as i32;
        let (out_ptr, g_ptr, x_ptr, n64) = (
            out.address(0),
            grad.memory.address(0),
            x.memory.address(0),
            n as i64,
        );
        self.launch_elements(
            kernel,
            n,
            &[
                &out_ptr, &g_ptr, &vg, &x_ptr, &vx, &n64, &code, &slope, &dropped, &threshold,
                &scale, &seed,
            ],
        )?;
        Ok(Some(out))
    }

    fn dropout(&self, x: Src<'_, CudaBuffer>, draws: DropoutDraws) -> Result<CudaBuffer> {
        check_floating("dropout", x.dtype())?;
        self.dropped_out(x, None, draws)
    }

    fn unary_dropout(
        &self,
        x: Src<'_, CudaBuffer>,
        op: UnaryOp,
        draws: DropoutDraws,
    ) -> Result<Option<CudaBuffer>> {
        if check_floating(op.name(), x.dtype()).is_err() {
            return Ok(None);
        }
        self.dropped_out(x, Some(op), draws).map(Some)
    }

    fn binary(
        &self,
        a: Src<'_, CudaBuffer>,
        b: Src<'_, CudaBuffer>,
        op: BinaryOp,
    ) -> Result<CudaBuffer> {
        same_dtype(op.name(), a.dtype(), b.dtype())?;
        check_floating(op.name(), a.dtype())?;
        let n = a.numel();
        let out = CudaBuffer::uninit(self, n, a.dtype())?;
        let [va, vb] = views(op.name(), a.dims(), [a.layout, b.layout])?;
        let kernel = self.kernel(MODULE, "binary", [dtype_suffix(a.dtype()), ""])?;
        let code = op.code() as i32;
        let (o, pa, pb, n64) = (out.address(0), a.memory.address(0), b.memory.address(0), n as i64);
        self.launch_elements(kernel, n, &[&o, &pa, &va, &pb, &vb, &n64, &code])?;
        Ok(out)
    }

    fn compare(
        &self,
        a: Src<'_, CudaBuffer>,
        b: Src<'_, CudaBuffer>,
        op: CompareOp,
    ) -> Result<CudaBuffer> {
        same_dtype("compare", a.dtype(), b.dtype())?;
        let n = a.numel();
        let out = CudaBuffer::uninit(self, n, DType::Bool)?;
        let [va, vb] = views("compare", a.dims(), [a.layout, b.layout])?;
        let kernel = self.kernel(MODULE, "compare", [dtype_suffix(a.dtype()), ""])?;
        let code = op.code() as i32;
        let (o, pa, pb, n64) = (out.address(0), a.memory.address(0), b.memory.address(0), n as i64);
        self.launch_elements(kernel, n, &[&o, &pa, &va, &pb, &vb, &n64, &code])?;
        Ok(out)
    }

    fn select(
        &self,
        condition: Src<'_, CudaBuffer>,
        on_true: Src<'_, CudaBuffer>,
        on_false: Src<'_, CudaBuffer>,
    ) -> Result<CudaBuffer> {
        same_dtype("where", on_true.dtype(), on_false.dtype())?;
        same_dtype("where", condition.dtype(), DType::Bool)?;
        let n = on_true.numel();
        let out = CudaBuffer::uninit(self, n, on_true.dtype())?;
        let [vc, vt, vf] = views(
            "where",
            on_true.dims(),
            [condition.layout, on_true.layout, on_false.layout],
        )?;
        let kernel = self.kernel(MODULE, "select", [width_suffix(on_true.dtype()), ""])?;
        let (o, pc, pt, pf, n64) = (
            out.address(0),
            condition.memory.address(0),
            on_true.memory.address(0),
            on_false.memory.address(0),
            n as i64,
        );
        self.launch_elements(kernel, n, &[&o, &pc, &vc, &pt, &vt, &pf, &vf, &n64])?;
        Ok(out)
    }

    fn logical_and(&self, a: Src<'_, CudaBuffer>, b: Src<'_, CudaBuffer>) -> Result<CudaBuffer> {
        same_dtype("logical_and", a.dtype(), DType::Bool)?;
        same_dtype("logical_and", b.dtype(), DType::Bool)?;
        let n = a.numel();
        let out = CudaBuffer::uninit(self, n, DType::Bool)?;
        let [va, vb] = views("logical_and", a.dims(), [a.layout, b.layout])?;
        let kernel = self.kernel(MODULE, "logical_and", ["", ""])?;
        let (o, pa, pb, n64) = (out.address(0), a.memory.address(0), b.memory.address(0), n as i64);
        self.launch_elements(kernel, n, &[&o, &pa, &va, &pb, &vb, &n64])?;
        Ok(out)
    }

    fn logical_not(&self, x: Src<'_, CudaBuffer>) -> Result<CudaBuffer> {
        same_dtype("logical_not", x.dtype(), DType::Bool)?;
        self.map_view("logical_not", x, ("logical_not", ["", ""]), DType::Bool)
    }

    fn cast(&self, x: Src<'_, CudaBuffer>, dtype: DType) -> Result<CudaBuffer> {
        let suffixes = [dtype_suffix(x.dtype()), dtype_suffix(dtype)];
        let out = CudaBuffer::uninit(self, x.numel(), dtype)?;
        let start = x.memory.address(x.layout.offset());
        let floats = [x.dtype(), dtype].iter().all(|&d| check_floating("to_dtype", d).is_ok());
        let quad_aligned = |address: u64, dtype: DType| {
            address.is_multiple_of(4 * dtype.size_in_bytes() as u64)
        };
        if floats
            && x.layout.is_contiguous()
            && quad_aligned(start, x.dtype())
            && quad_aligned(out.address(0), dtype)
        {
            let kernel = self.kernel(MODULE, "cast_quads", suffixes)?;
            let (o, n) = (out.address(0), x.numel());
            self.launch_elements(kernel, n.div_ceil(4), &[&o, &start, &(n as i64)])?;
            return Ok(out);
        }
        self.map_view_into("to_dtype", x, ("cast", suffixes), out)
    }

    fn copy(&self, x: Src<'_, CudaBuffer>) -> Result<CudaBuffer> {
        self.map_view("contiguous", x, ("copy", [width_suffix(x.dtype()), ""]), x.dtype())
    }
}

impl CudaDevice {
    /// A kernel `(out, x, view of x, n)` writing `dtype` elements.
    fn map_view(
        &self,
        op: &'static str,
        x: Src<'_, CudaBuffer>,
        (kernel, suffixes): (&'static str, [&'static str; 2]),
        dtype: DType,
    ) -> Result<CudaBuffer> {
        let out = CudaBuffer::uninit(self, x.numel(), dtype)?;
        self.map_view_into(op, x, (kernel, suffixes), out)
    }

    /// [`map_view`](Self::map_view) into `out`, a fresh buffer of `x`'s element count.
    fn map_view_into(
        &self,
        op: &'static str,
        x: Src<'_, CudaBuffer>,
        (kernel, suffixes): (&'static str, [&'static str; 2]),
        out: CudaBuffer,
    ) -> Result<CudaBuffer> {
        let n = x.numel();
        let [vx] = views(op, x.dims(), [x.layout])?;
        let kernel = self.kernel(MODULE, kernel, suffixes)?;
        let (o, px, n64) = (out.address(0), x.memory.address(0), n as i64);
        self.launch_elements(kernel, n, &[&o, &px, &vx, &n64])?;
        Ok(out)
    }

    /// `dropout(op(x))`, or `dropout(x)` without an op.
    fn dropped_out(
        &self,
        x: Src<'_, CudaBuffer>,
        op: Option<UnaryOp>,
        draws: DropoutDraws,
    ) -> Result<CudaBuffer> {
        let n = x.numel();
        let out = CudaBuffer::uninit(self, n, x.dtype())?;
        let [vx] = views("dropout", x.dims(), [x.layout])?;
        let kernel = self.kernel(MODULE, "unary_dropout", [dtype_suffix(x.dtype()), ""])?;
        let code = op.map_or(-1, |op| op.code() as i32);
        let (p0, p1) = op.map_or((0.0, 0.0), scalars);
        let threshold = keep_threshold(draws);
        let (o, px, n64) = (out.address(0), x.memory.address(0), n as i64);
        self.launch_elements(
            kernel,
            n,
            &[&o, &px, &vx, &n64, &code, &p0, &p1, &threshold, &draws.scale, &draws.seed],
        )?;
        Ok(out)
    }
}
