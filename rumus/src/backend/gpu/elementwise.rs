//! Launchers of `shaders/elementwise.wgsl`: one strided kernel per kind of element-wise op,
//! the op itself chosen by a code in the parameters.

use super::batch::{grid_1d, grid_spread};
use super::context::GpuDevice;
use super::memory::{GpuBuffer, check_dtype, check_words};
use super::operand::{Strided, slot, spread_params};
use super::pipelines::Module;
use crate::dtype::DType;
use crate::error::Result;
use crate::backend::kinds::{BinaryOp, CompareOp, DropoutDraws, UnaryOp};
use crate::backend::{Elementwise, Src};
use crate::shape::Layout;
use crate::tensor::DynTensor;

/// The kernel's code for each unary op and its two scalars.
fn unary_code(op: UnaryOp) -> (u32, f32, f32) {
    match op {
        UnaryOp::Neg => (0, 0.0, 0.0),
        UnaryOp::Exp => (1, 0.0, 0.0),
        UnaryOp::Log => (2, 0.0, 0.0),
        UnaryOp::Sqrt => (3, 0.0, 0.0),
        UnaryOp::Rsqrt => (4, 0.0, 0.0),
        UnaryOp::Abs => (5, 0.0, 0.0),
        UnaryOp::Sign => (6, 0.0, 0.0),
        UnaryOp::Erf => (7, 0.0, 0.0),
        UnaryOp::Relu => (8, 0.0, 0.0),
        UnaryOp::LeakyRelu(slope) => (9, slope as f32, 0.0),
        UnaryOp::Sigmoid => (10, 0.0, 0.0),
        UnaryOp::Tanh => (11, 0.0, 0.0),
        UnaryOp::Gelu => (12, 0.0, 0.0),
        UnaryOp::GeluTanh => (13, 0.0, 0.0),
        UnaryOp::Silu => (14, 0.0, 0.0),
        UnaryOp::Softplus { beta, threshold } => (15, beta as f32, threshold as f32),
        UnaryOp::Powf(p) => (16, p as f32, 0.0),
        UnaryOp::Clamp { min, max } => (17, min as f32, max as f32),
        UnaryOp::AddScalar(s) => (18, s as f32, 0.0),
        UnaryOp::MulScalar(s) => (19, s as f32, 0.0),
        UnaryOp::Sin => (20, 0.0, 0.0),
        UnaryOp::Cos => (21, 0.0, 0.0),
        UnaryOp::Floor => (22, 0.0, 0.0),
    }
}

fn dtype_code(dtype: DType) -> u32 {
    match dtype {
        DType::F32 | DType::F64 => 0,
        DType::I64 => 1,
        DType::Bool => 2,
        DType::F16 => 3,
    }
}

/// What one launch needs besides its operands.
struct Launch {
    entry: &'static str,
    op: u32,
    scalars: (f32, f32),
    /// The operands' dtype (comparisons and casts switch on it).
    dtype: DType,
    /// Dropout applied to each result (`unary` and `binary` only).
    dropout: Option<DropoutDraws>,
}

impl Launch {
    fn new(entry: &'static str, op: u32, dtype: DType) -> Self {
        Launch {
            entry,
            op,
            scalars: (0.0, 0.0),
            dtype,
            dropout: None,
        }
    }
}

/// Writes dropout's draws into their words of a parameter block (`DROP` of elementwise.wgsl).
fn write_draws(draws: DropoutDraws, params: &mut Vec<u32>) {
    if params.len() < slot::DROP + 4 {
        params.resize(slot::DROP + 4, 0);
    }
    params[slot::DROP] = draws.seed as u32;
    params[slot::DROP + 1] = (draws.seed >> 32) as u32;
    params[slot::DROP + 2] = (draws.p as f32).to_bits();
    params[slot::DROP + 3] = (draws.scale as f32).to_bits();
}

/// `FLAG_DROPOUT` of elementwise.wgsl.
const FLAG_DROPOUT: u32 = 4;

impl GpuDevice {
    /// Runs `launch` over `dims` with `operands` (each viewed with its layout, broadcast to
    /// `dims`) into fresh contiguous memory of `out_dtype`.
    fn strided(
        &self,
        launch: Launch,
        dims: &[usize],
        operands: &[Src<'_, GpuBuffer>],
        out_dtype: DType,
    ) -> Result<GpuBuffer> {
        let numel = crate::shape::checked_numel(dims, launch.entry)?;
        // Only casts from f16 reach here with f16 operands (every other launcher checks).
        if launch.dtype != DType::F16 {
            for operand in operands {
                check_words(operand.dtype(), "GPU kernel")?;
            }
        }
        let out = GpuBuffer::uninit(self, numel, out_dtype, launch.entry)?;
        let layouts: Vec<&Layout> = operands.iter().map(|operand| operand.layout).collect();
        let strided = Strided::new(launch.entry, dims, &layouts)?;
        let (mut params, groups) = spread_params(&strided, numel);
        params[slot::OP] = launch.op;
        params[slot::SCALAR0] = launch.scalars.0.to_bits();
        params[slot::SCALAR1] = launch.scalars.1.to_bits();
        params[slot::DTYPE] = dtype_code(launch.dtype);
        if let Some(draws) = launch.dropout {
            params[slot::FLAGS] |= FLAG_DROPOUT;
            write_draws(draws, &mut params);
        }
        let mut bindings: Vec<(u32, &wgpu::Buffer)> = operands
            .iter()
            .enumerate()
            .map(|(k, operand)| (k as u32 + 1, operand.memory.raw()))
            .collect();
        bindings.push((4, out.raw()));
        self.dispatch(
            Module::Elementwise,
            launch.entry,
            &params,
            &bindings,
            groups,
        );
        Ok(out)
    }

    /// `op(x)`, then dropout with `draws` when given, in one pass.
    pub(crate) fn unary_then_dropout(
        &self,
        x: Src<'_, GpuBuffer>,
        op: UnaryOp,
        draws: Option<DropoutDraws>,
    ) -> Result<GpuBuffer> {
        check_float(x.dtype(), op.name())?;
        let (code, s0, s1) = unary_code(op);
        let launch = Launch {
            scalars: (s0, s1),
            dropout: draws,
            ..Launch::new("unary", code, x.dtype())
        };
        self.strided(launch, x.dims(), &[x], x.dtype())
    }

    /// `grad * d op(x) / dx` for relu, leaky relu, sigmoid, tanh, both GELUs and SiLU in one
    /// pass (binary ops 5-11 of elementwise.wgsl), `grad` dropped out with `draws` first when
    /// given (the gradient of `dropout(op(x))`); `None` for other ops.
    pub(crate) fn activation_grad_then_dropout(
        &self,
        grad: Src<'_, GpuBuffer>,
        x: Src<'_, GpuBuffer>,
        op: UnaryOp,
        draws: Option<DropoutDraws>,
    ) -> Result<Option<GpuBuffer>> {
        let (code, slope) = match op {
            UnaryOp::Relu => (5, 0.0),
            UnaryOp::LeakyRelu(slope) => (6, slope as f32),
            UnaryOp::Sigmoid => (7, 0.0),
            UnaryOp::Tanh => (8, 0.0),
            UnaryOp::Gelu => (9, 0.0),
            UnaryOp::GeluTanh => (10, 0.0),
            UnaryOp::Silu => (11, 0.0),
            _ => return Ok(None),
        };
        check_float(grad.dtype(), op.name())?;
        let launch = Launch {
            scalars: (slope, 0.0),
            dropout: draws,
            ..Launch::new("binary", code, grad.dtype())
        };
        self.strided(launch, grad.dims(), &[grad, x], grad.dtype())
            .map(Some)
    }

    /// `x` (any dtype, any view) as contiguous packed `f16`: one thread per output word, so
    /// no two threads write halves of one word.
    pub(crate) fn to_half(&self, x: Src<'_, GpuBuffer>) -> Result<GpuBuffer> {
        let numel = x.numel();
        let out = GpuBuffer::uninit(self, numel, DType::F16, "to_dtype(f16)")?;
        let strided = Strided::new("to_dtype(f16)", x.dims(), &[x.layout])?;
        // Threads for a quarter of the elements: two words each.
        let (mut params, groups) = spread_params(&strided, numel);
        params[slot::DTYPE] = dtype_code(x.dtype());
        self.dispatch(
            Module::Elementwise,
            "to_half",
            &params,
            &[(1, x.memory.raw()), (4, out.raw())],
            groups,
        );
        Ok(out)
    }

    /// A contiguous copy of `t`'s view, for launchers that still take tensors.
    pub(crate) fn copy_tensor(&self, t: &DynTensor) -> Result<DynTensor> {
        self.with_src(t, |x| Elementwise::copy(self, x))
            .map(|out| DynTensor::from_gpu(out, t.dims()))
    }
}

impl Elementwise for GpuDevice {
    fn unary(&self, x: Src<'_, GpuBuffer>, op: UnaryOp) -> Result<GpuBuffer> {
        self.unary_then_dropout(x, op, None)
    }

    fn activation_grad(
        &self,
        grad: Src<'_, GpuBuffer>,
        x: Src<'_, GpuBuffer>,
        op: UnaryOp,
        draws: Option<DropoutDraws>,
    ) -> Result<Option<GpuBuffer>> {
        self.activation_grad_then_dropout(grad, x, op, draws)
    }

    fn dropout(&self, x: Src<'_, GpuBuffer>, draws: DropoutDraws) -> Result<GpuBuffer> {
        if x.layout.is_contiguous() {
            return self.dropout_contiguous(x, draws);
        }
        let copy = Elementwise::copy(self, x)?;
        let layout = Layout::contiguous(x.dims());
        self.dropout_contiguous(Src::new(&copy, &layout), draws)
    }

    fn unary_dropout(
        &self,
        x: Src<'_, GpuBuffer>,
        op: UnaryOp,
        draws: DropoutDraws,
    ) -> Result<Option<GpuBuffer>> {
        self.unary_then_dropout(x, op, Some(draws)).map(Some)
    }

    fn binary(
        &self,
        a: Src<'_, GpuBuffer>,
        b: Src<'_, GpuBuffer>,
        op: BinaryOp,
    ) -> Result<GpuBuffer> {
        check_float(a.dtype(), "binary op")?;
        let launch = Launch::new("binary", op as u32, a.dtype());
        self.strided(launch, a.dims(), &[a, b], a.dtype())
    }

    fn compare(
        &self,
        a: Src<'_, GpuBuffer>,
        b: Src<'_, GpuBuffer>,
        op: CompareOp,
    ) -> Result<GpuBuffer> {
        check_words(a.dtype(), "compare")?;
        let launch = Launch::new("compare", op as u32, a.dtype());
        self.strided(launch, a.dims(), &[a, b], DType::Bool)
    }

    fn select(
        &self,
        condition: Src<'_, GpuBuffer>,
        on_true: Src<'_, GpuBuffer>,
        on_false: Src<'_, GpuBuffer>,
    ) -> Result<GpuBuffer> {
        check_words(on_true.dtype(), "where")?;
        let launch = Launch::new("choose", 0, on_true.dtype());
        let operands = [condition, on_true, on_false];
        self.strided(launch, condition.dims(), &operands, on_true.dtype())
    }

    fn logical_and(&self, a: Src<'_, GpuBuffer>, b: Src<'_, GpuBuffer>) -> Result<GpuBuffer> {
        check_mask(a, "logical_and")?;
        check_mask(b, "logical_and")?;
        let launch = Launch::new("logical", 0, DType::Bool);
        self.strided(launch, a.dims(), &[a, b], DType::Bool)
    }

    fn logical_not(&self, x: Src<'_, GpuBuffer>) -> Result<GpuBuffer> {
        check_mask(x, "logical_not")?;
        let launch = Launch::new("logical", 2, DType::Bool);
        self.strided(launch, x.dims(), &[x, x], DType::Bool)
    }

    fn cast(&self, x: Src<'_, GpuBuffer>, dtype: DType) -> Result<GpuBuffer> {
        check_dtype(x.dtype(), "to_dtype")?;
        check_dtype(dtype, "to_dtype")?;
        if dtype == DType::F16 {
            return self.to_half(x);
        }
        let launch = Launch::new("convert", dtype_code(dtype), x.dtype());
        self.strided(launch, x.dims(), &[x], dtype)
    }

    fn copy(&self, x: Src<'_, GpuBuffer>) -> Result<GpuBuffer> {
        if x.dtype() == DType::F16 {
            return self.to_half(x);
        }
        let launch = Launch::new("copy", 0, x.dtype());
        self.strided(launch, x.dims(), &[x], x.dtype())
    }
}

fn check_mask(x: Src<'_, GpuBuffer>, op: &'static str) -> Result<()> {
    if x.dtype() != DType::Bool {
        return Err(crate::error::Error::DType {
            op,
            expected: "bool masks",
            found: x.dtype(),
        });
    }
    Ok(())
}

impl GpuDevice {
    /// `dst = dst * scale + alpha * src` in place, `src` viewed with `ls` (broadcast to
    /// `dst`'s dims).
    pub(crate) fn scale_add(
        &self,
        dst: &DynTensor,
        src: (&DynTensor, &Layout),
        scale: f64,
        alpha: f64,
    ) -> Result<()> {
        check_float(dst.dtype(), "in-place update")?;
        self.update(dst, src, (scale, alpha), u32::from(scale == 0.0))
    }

    /// Copies `src` (viewed with `dst`'s dims) into the view `dst`, any dtype.
    pub(crate) fn copy_into(&self, dst: &DynTensor, src: (&DynTensor, &Layout)) -> Result<()> {
        self.update(dst, src, (0.0, 1.0), 2)
    }

    /// A new contiguous tensor with every element `value`.
    pub(crate) fn full(&self, dims: &[usize], value: f64, dtype: DType) -> Result<DynTensor> {
        let numel = crate::shape::checked_numel(dims, "full")?;
        let out = GpuBuffer::uninit(self, numel, dtype, "full")?;
        // The kernel fills words; packed f16 holds two elements per word.
        let filled_words = super::memory::words(numel, dtype);
        let (groups, row) = grid_1d(filled_words);
        let mut params = vec![0u32; slot::DTYPE + 1];
        params[slot::NUMEL] = filled_words as u32;
        params[slot::ROW] = row;
        params[slot::SCALAR0] = match dtype {
            DType::I64 => (value as i32) as u32,
            DType::Bool => u32::from(value != 0.0),
            DType::F32 | DType::F64 => (value as f32).to_bits(),
            DType::F16 => {
                let bits = u32::from(half::f16::from_f64(value).to_bits());
                bits | (bits << 16)
            }
        };
        let groups = if numel == 0 { [0, 0, 0] } else { groups };
        self.dispatch(
            Module::Elementwise,
            "fill",
            &params,
            &[(4, out.raw())],
            groups,
        );
        Ok(DynTensor::from_gpu(out, dims))
    }

    /// `g * scale` (f32, any view) as a new contiguous tensor, setting `flag` (an `i64`
    /// `[1]`, one `i32` word on this device) nonzero where an element of `g` or of the result is infinite or
    /// NaN: the loss scaler's unscale and check in one pass, where a sum per gradient took
    /// two more dispatches and an add.
    pub(crate) fn scale_flagging_non_finite(
        &self,
        g: &DynTensor,
        scale: f64,
        flag: &DynTensor,
    ) -> Result<DynTensor> {
        // (The scaler sends f32 gradients only; others take the sums.)
        debug_assert_eq!(g.dtype(), DType::F32);
        let numel = g.numel();
        let out = GpuBuffer::uninit(self, numel, DType::F32, "GradScaler::unscale")?;
        let strided = Strided::new("GradScaler::unscale", g.dims(), &[g.layout()])?;
        let (mut params, groups) = spread_params(&strided, numel);
        params[slot::SCALAR0] = (scale as f32).to_bits();
        let (input, flag_memory) = (self.memory_of(g)?, self.memory_of(flag)?);
        let groups = if numel == 0 { [0, 0, 0] } else { groups };
        self.dispatch(
            Module::Elementwise,
            "scale_flagging_non_finite",
            &params,
            &[(1, input.raw()), (4, out.raw()), (5, flag_memory.raw())],
            groups,
        );
        Ok(DynTensor::from_gpu(out, g.dims()))
    }

    /// `x` (f32) with each element kept and multiplied by `scale` with probability `1 - p`,
    /// else zeroed; the draw of element `i` (of the contiguous order) is a hash of `seed`
    /// and `i`, so the same seed drops the same elements of a gradient of the same shape.
    fn dropout_contiguous(&self, x: Src<'_, GpuBuffer>, draws: DropoutDraws) -> Result<GpuBuffer> {
        check_float(x.dtype(), "dropout")?;
        check_words(x.dtype(), "dropout")?;
        let numel = x.numel();
        let out = GpuBuffer::uninit(self, numel, DType::F32, "dropout")?;
        let (groups, row, span) = grid_spread(numel);
        let mut params = vec![0u32; slot::SPAN + 1];
        params[slot::NUMEL] = numel as u32;
        params[slot::ROW] = row;
        params[slot::SPAN] = span;
        write_draws(draws, &mut params);
        params[slot::OFFSETS] = x.layout.offset() as u32;
        let groups = if numel == 0 { [0, 0, 0] } else { groups };
        self.dispatch(
            Module::Elementwise,
            "dropout",
            &params,
            &[(1, x.memory.raw()), (4, out.raw())],
            groups,
        );
        Ok(out)
    }

    /// The gradient of a cross-entropy with respect to contiguous logits `[N, C, D..]`:
    /// `(exp(x - lse) - onehot(target)) * weight`, with `lse_and_weights` `[N, D.., 2]` (each
    /// row's log-sum-exp and its weight) and `targets` `[N, D..]` class indices.
    pub(crate) fn cross_entropy_grad(
        &self,
        logits: &DynTensor,
        lse_and_weights: &DynTensor,
        targets: &DynTensor,
    ) -> Result<DynTensor> {
        check_float(logits.dtype(), "cross_entropy")?;
        let contiguous = |t: &DynTensor| {
            if t.is_contiguous() {
                Ok(t.clone())
            } else {
                self.copy_tensor(t)
            }
        };
        let (x, pairs, targets) = (
            contiguous(logits)?,
            contiguous(lse_and_weights)?,
            contiguous(targets)?,
        );
        let numel = x.numel();
        let classes = x.dims().get(1).copied().unwrap_or(1);
        let inner: usize = x.dims().iter().skip(2).product();
        let out = GpuBuffer::uninit(self, numel, DType::F32, "cross_entropy")?;
        let (groups, row, span) = grid_spread(numel);
        let mut params = vec![0u32; slot::SPAN + 1];
        params[slot::NUMEL] = numel as u32;
        params[1] = classes as u32;
        params[2] = inner as u32;
        params[slot::ROW] = row;
        params[slot::SPAN] = span;
        for (k, t) in [&x, &pairs, &targets].into_iter().enumerate() {
            params[slot::OFFSETS + k] = t.layout().offset() as u32;
        }
        let memories = [
            self.memory_of(&x)?,
            self.memory_of(&pairs)?,
            self.memory_of(&targets)?,
        ];
        let groups = if numel == 0 { [0, 0, 0] } else { groups };
        self.dispatch(
            Module::Elementwise,
            "cross_entropy_grad",
            &params,
            &[
                (1, memories[0].raw()),
                (2, memories[1].raw()),
                (3, memories[2].raw()),
                (4, out.raw()),
            ],
            groups,
        );
        Ok(DynTensor::from_gpu(out, x.dims()))
    }

    fn update(
        &self,
        dst: &DynTensor,
        src: (&DynTensor, &Layout),
        (scale, alpha): (f64, f64),
        flags: u32,
    ) -> Result<()> {
        let dims = dst.dims();
        let numel = dst.numel();
        let target = self.memory_of(dst)?;
        // Operand slots: 0 the source, 3 the destination view (slots 1-2 unused).
        let unused = Layout::contiguous(dims);
        let strided = Strided::new(
            "in-place update",
            dims,
            &[src.1, &unused, &unused, dst.layout()],
        )?;
        let (mut params, groups) = spread_params(&strided, numel);
        params[slot::FLAGS] = flags;
        params[slot::SCALAR0] = (scale as f32).to_bits();
        params[slot::SCALAR1] = (alpha as f32).to_bits();
        let source = self.memory_of(src.0)?;
        self.dispatch(
            Module::Elementwise,
            "scale_add",
            &params,
            &[(1, source.raw()), (4, target.raw())],
            groups,
        );
        dst.storage().mark_written();
        Ok(())
    }
}

pub(crate) fn check_float(dtype: DType, op: &'static str) -> Result<()> {
    if dtype != DType::F32 {
        return Err(crate::Error::DType {
            op,
            expected: "a floating-point tensor (f32 on the GPU)",
            found: dtype,
        });
    }
    Ok(())
}

impl GpuDevice {
    /// `tensors` (checked to fit) joined along `axis` into a new tensor of `dims`.
    pub(crate) fn cat(
        &self,
        tensors: &[&DynTensor],
        axis: usize,
        dims: &[usize],
    ) -> Result<DynTensor> {
        let dtype = tensors[0].dtype();
        let numel = crate::shape::checked_numel(dims, "cat")?;
        let out = DynTensor::from_gpu(GpuBuffer::uninit(self, numel, dtype, "cat")?, dims);
        let mut start = 0;
        for tensor in tensors {
            let len = tensor.dims()[axis];
            let part = out.view_with(out.layout().narrow(axis, start, len));
            self.copy_into(&part, (tensor, tensor.layout()))?;
            start += len;
        }
        Ok(out)
    }
}
