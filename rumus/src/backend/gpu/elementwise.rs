//! Launchers of `shaders/elementwise.wgsl`: one strided kernel per kind of element-wise op,
//! the op itself chosen by a code in the parameters.

use super::batch::{grid_1d, grid_spread};
use super::context::GpuDevice;
use super::memory::{GpuBuffer, check_dtype, check_words};
use super::operand::{Strided, slot, spread_params};
use super::pipelines::Module;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::dropout::DropoutDraws;
use crate::ops::elementwise::{BinaryOp, CompareOp};
use crate::ops::unary::UnaryOp;
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
    /// `dims`) into a fresh contiguous output of `out_dtype`.
    fn strided(
        &self,
        launch: Launch,
        dims: &[usize],
        operands: &[(&DynTensor, &Layout)],
        out_dtype: DType,
    ) -> Result<DynTensor> {
        let numel = crate::shape::checked_numel(dims, launch.entry)?;
        let out = GpuBuffer::uninit(self, numel, out_dtype, launch.entry)?;
        let layouts: Vec<&Layout> = operands.iter().map(|(_, layout)| *layout).collect();
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
        // Only casts from f16 reach here with f16 operands (every other launcher checks).
        let memories = operands
            .iter()
            .map(|(tensor, _)| match launch.dtype {
                DType::F16 => self.any_memory_of(tensor),
                _ => self.memory_of(tensor),
            })
            .collect::<Result<Vec<_>>>()?;
        let mut bindings: Vec<(u32, &wgpu::Buffer)> = memories
            .iter()
            .enumerate()
            .map(|(k, memory)| (k as u32 + 1, memory.raw()))
            .collect();
        bindings.push((4, out.raw()));
        self.dispatch(
            Module::Elementwise,
            launch.entry,
            &params,
            &bindings,
            groups,
        );
        Ok(DynTensor::from_gpu(out, dims))
    }

    pub(crate) fn unary(&self, x: &DynTensor, op: UnaryOp) -> Result<DynTensor> {
        self.unary_then_dropout(x, op, None)
    }

    /// `op(x)`, then dropout with `draws` when given, in one pass.
    pub(crate) fn unary_then_dropout(
        &self,
        x: &DynTensor,
        op: UnaryOp,
        draws: Option<DropoutDraws>,
    ) -> Result<DynTensor> {
        check_float(x.dtype(), op.name())?;
        let (code, s0, s1) = unary_code(op);
        let launch = Launch {
            scalars: (s0, s1),
            dropout: draws,
            ..Launch::new("unary", code, x.dtype())
        };
        self.strided(launch, x.dims(), &[(x, x.layout())], x.dtype())
    }

    pub(crate) fn binary(
        &self,
        (a, la): (&DynTensor, &Layout),
        (b, lb): (&DynTensor, &Layout),
        op: BinaryOp,
    ) -> Result<DynTensor> {
        check_float(a.dtype(), "binary op")?;
        let launch = Launch::new("binary", op as u32, a.dtype());
        self.strided(launch, la.dims(), &[(a, la), (b, lb)], a.dtype())
    }

    /// `grad * d op(x) / dx` for relu, leaky relu, sigmoid, tanh, both GELUs and SiLU in one
    /// pass (binary ops 5-11 of elementwise.wgsl), `grad` dropped out with `draws` first when
    /// given (the gradient of `dropout(op(x))`); `None` for other ops.
    pub(crate) fn activation_grad(
        &self,
        grad: &DynTensor,
        x: &DynTensor,
        op: UnaryOp,
        draws: Option<DropoutDraws>,
    ) -> Result<Option<DynTensor>> {
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
        let operands = [(grad, grad.layout()), (x, x.layout())];
        self.strided(launch, grad.dims(), &operands, grad.dtype())
            .map(Some)
    }

    pub(crate) fn compare(
        &self,
        (a, la): (&DynTensor, &Layout),
        (b, lb): (&DynTensor, &Layout),
        op: CompareOp,
    ) -> Result<DynTensor> {
        check_words(a.dtype(), "compare")?;
        let launch = Launch::new("compare", op as u32, a.dtype());
        self.strided(launch, la.dims(), &[(a, la), (b, lb)], DType::Bool)
    }

    /// `condition ? on_true : on_false`, all three viewed with the output dims.
    pub(crate) fn choose(
        &self,
        condition: (&DynTensor, &Layout),
        on_true: (&DynTensor, &Layout),
        on_false: (&DynTensor, &Layout),
    ) -> Result<DynTensor> {
        check_words(on_true.0.dtype(), "where")?;
        let launch = Launch::new("choose", 0, on_true.0.dtype());
        let dims = condition.1.dims().to_vec();
        self.strided(
            launch,
            &dims,
            &[condition, on_true, on_false],
            on_true.0.dtype(),
        )
    }

    /// `and` (0), `or` (1) of two masks, or `not` (2) of the first.
    pub(crate) fn logical(&self, operands: &[(&DynTensor, &Layout)], op: u32) -> Result<DynTensor> {
        let launch = Launch::new("logical", op, DType::Bool);
        let dims = operands[0].1.dims().to_vec();
        self.strided(launch, &dims, operands, DType::Bool)
    }

    pub(crate) fn cast(&self, x: &DynTensor, dtype: DType) -> Result<DynTensor> {
        check_dtype(x.dtype(), "to_dtype")?;
        check_dtype(dtype, "to_dtype")?;
        if dtype == DType::F16 {
            return self.to_half(x);
        }
        let launch = Launch::new("convert", dtype_code(dtype), x.dtype());
        self.strided(launch, x.dims(), &[(x, x.layout())], dtype)
    }

    /// A contiguous copy of `x`'s view.
    pub(crate) fn copy(&self, x: &DynTensor) -> Result<DynTensor> {
        if x.dtype() == DType::F16 {
            return self.to_half(x);
        }
        let launch = Launch::new("copy", 0, x.dtype());
        self.strided(launch, x.dims(), &[(x, x.layout())], x.dtype())
    }

    /// `x` (any dtype, any view) as a contiguous packed `f16` tensor: one thread per output
    /// word, so no two threads write halves of one word.
    pub(crate) fn to_half(&self, x: &DynTensor) -> Result<DynTensor> {
        let numel = x.numel();
        let out = GpuBuffer::uninit(self, numel, DType::F16, "to_dtype(f16)")?;
        let strided = Strided::new("to_dtype(f16)", x.dims(), &[x.layout()])?;
        // Threads for a quarter of the elements: two words each.
        let (mut params, groups) = spread_params(&strided, numel);
        params[slot::DTYPE] = dtype_code(x.dtype());
        let source = self.any_memory_of(x)?;
        self.dispatch(
            Module::Elementwise,
            "to_half",
            &params,
            &[(1, source.raw()), (4, out.raw())],
            groups,
        );
        Ok(DynTensor::from_gpu(out, x.dims()))
    }

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
    pub(crate) fn dropout(&self, x: &DynTensor, draws: DropoutDraws) -> Result<DynTensor> {
        check_float(x.dtype(), "dropout")?;
        let x = if x.is_contiguous() { x.clone() } else { self.copy(x)? };
        let numel = x.numel();
        let out = GpuBuffer::uninit(self, numel, DType::F32, "dropout")?;
        let (groups, row, span) = grid_spread(numel);
        let mut params = vec![0u32; slot::SPAN + 1];
        params[slot::NUMEL] = numel as u32;
        params[slot::ROW] = row;
        params[slot::SPAN] = span;
        write_draws(draws, &mut params);
        params[slot::OFFSETS] = x.layout().offset() as u32;
        let input = self.memory_of(&x)?;
        let groups = if numel == 0 { [0, 0, 0] } else { groups };
        self.dispatch(
            Module::Elementwise,
            "dropout",
            &params,
            &[(1, input.raw()), (4, out.raw())],
            groups,
        );
        Ok(DynTensor::from_gpu(out, x.dims()))
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
                self.copy(t)
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
