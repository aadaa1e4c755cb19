//! Launchers of `shaders/elementwise.wgsl`: one strided kernel per kind of element-wise op,
//! the op itself chosen by a code in the parameters.

use super::batch::{grid_1d, grid_spread};
use super::context::GpuDevice;
use super::memory::{GpuBuffer, check_dtype, check_words};
use super::operand::{Strided, slot, spread_params};
use super::packed::Packed;
use super::pipelines::Module;
use crate::dtype::DType;
use crate::error::Result;
use crate::backend::kinds::{BinaryOp, CompareOp, DropoutDraws, UnaryOp};
use crate::backend::{Allocate, Pointwise, Loss, Src};
use crate::shape::Layout;

/// The kernel's code for each unary op (its [`UnaryOp::code`]) and its two scalars.
fn unary_code(op: UnaryOp) -> (u32, f32, f32) {
    let (s0, s1) = match op {
        UnaryOp::LeakyRelu(slope) => (slope as f32, 0.0),
        UnaryOp::Softplus { beta, threshold } => (beta as f32, threshold as f32),
        UnaryOp::Powf(p) => (p as f32, 0.0),
        UnaryOp::Clamp { min, max } => (min as f32, max as f32),
        UnaryOp::AddScalar(s) | UnaryOp::MulScalar(s) => (s as f32, 0.0),
        _ => (0.0, 0.0),
    };
    (op.code(), s0, s1)
}

/// The op codes of elementwise.wgsl's `switch`es as WGSL constants (`UNARY_RELU`,
/// `BINARY_ADD`, `COMPARE_LT`), generated from the Rust enums and put in front of the
/// shader, so the numbers exist in one place.
pub(super) fn op_code_constants() -> String {
    let mut wgsl = String::new();
    let mut constant = |family: &str, name: &str, code: u32| {
        wgsl.push_str(&format!(
            "const {family}_{}: u32 = {code}u;\n",
            name.to_uppercase()
        ));
    };
    for op in UnaryOp::ALL {
        constant("UNARY", op.name(), op.code());
    }
    for op in BinaryOp::ALL {
        constant("BINARY", op.name(), op.code());
    }
    for op in CompareOp::ALL {
        constant("COMPARE", op.name(), op.code());
    }
    for op in UnaryOp::ALL {
        if let Some(code) = activation_grad_code(op) {
            constant("ACTIVATION_GRAD", op.name(), code);
        }
    }
    wgsl
}

/// The `binary` kernel's code for the one-pass gradient of activation `op`: after the
/// binary ops, in the order of [`UnaryOp::ALL`]; `None` for ops without such a gradient.
fn activation_grad_code(op: UnaryOp) -> Option<u32> {
    let position = UnaryOp::ALL
        .iter()
        .filter(|op| op.gradient_in_one_pass())
        .position(|other| other.code() == op.code())?;
    Some((BinaryOp::ALL.len() + position) as u32)
}

fn dtype_code(dtype: DType) -> u32 {
    match dtype {
        // (f64 and bf16 never reach a kernel: `check_dtype`)
        DType::F32 | DType::F64 | DType::BF16 => 0,
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
    /// pass (the `ACTIVATION_GRAD_*` ops of elementwise.wgsl's `binary`), `grad` dropped out with `draws` first when
    /// given (the gradient of `dropout(op(x))`); `None` for other ops.
    pub(crate) fn activation_grad_then_dropout(
        &self,
        grad: Src<'_, GpuBuffer>,
        x: Src<'_, GpuBuffer>,
        op: UnaryOp,
        draws: Option<DropoutDraws>,
    ) -> Result<Option<GpuBuffer>> {
        let Some(code) = activation_grad_code(op) else {
            return Ok(None);
        };
        let slope = match op {
            UnaryOp::LeakyRelu(slope) => slope as f32,
            _ => 0.0,
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
}

/// Filled memory, made by a fill kernel without a host copy.
impl Allocate for GpuDevice {
    fn full(&self, dims: &[usize], value: f64, dtype: DType) -> Result<GpuBuffer> {
        check_dtype(dtype, "full")?;
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
            DType::F32 | DType::F64 | DType::BF16 => (value as f32).to_bits(),
            DType::F16 => {
                let bits = u32::from(crate::element::f16_from_f64(value).to_bits());
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
        Ok(out)
    }
}

impl Pointwise for GpuDevice {
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
        let copy = Pointwise::copy(self, x)?;
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
        let launch = Launch::new("binary", op.code(), a.dtype());
        self.strided(launch, a.dims(), &[a, b], a.dtype())
    }

    fn compare(
        &self,
        a: Src<'_, GpuBuffer>,
        b: Src<'_, GpuBuffer>,
        op: CompareOp,
    ) -> Result<GpuBuffer> {
        check_words(a.dtype(), "compare")?;
        let launch = Launch::new("compare", op.code(), a.dtype());
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
    /// `g * scale` (f32, any view) as new contiguous memory, setting `flag` (an `i64` `[1]`,
    /// one `i32` word on this device) nonzero where an element of `g` or of the result is
    /// infinite or NaN: the loss scaler's unscale and check in one pass, where a sum per gradient took
    /// two more dispatches and an add.
    pub(crate) fn scale_flagging_non_finite(
        &self,
        g: Src<'_, GpuBuffer>,
        scale: f64,
        flag: &GpuBuffer,
    ) -> Result<GpuBuffer> {
        let numel = g.numel();
        let out = GpuBuffer::uninit(self, numel, DType::F32, "GradScaler::unscale")?;
        let strided = Strided::new("GradScaler::unscale", g.dims(), &[g.layout])?;
        let (mut params, groups) = spread_params(&strided, numel);
        params[slot::SCALAR0] = (scale as f32).to_bits();
        let groups = if numel == 0 { [0, 0, 0] } else { groups };
        self.dispatch(
            Module::Elementwise,
            "scale_flagging_non_finite",
            &params,
            &[(1, g.memory.raw()), (4, out.raw()), (5, flag.raw())],
            groups,
        );
        Ok(out)
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
}

impl Loss for GpuDevice {
    fn cross_entropy_grad(
        &self,
        logits: Src<'_, GpuBuffer>,
        lse_and_weights: Src<'_, GpuBuffer>,
        targets: Src<'_, GpuBuffer>,
    ) -> Result<GpuBuffer> {
        check_float(logits.dtype(), "cross_entropy")?;
        for operand in [lse_and_weights, targets] {
            check_words(operand.dtype(), "GPU kernel")?;
        }
        let operands = [
            Packed::of(self, logits)?,
            Packed::of(self, lse_and_weights)?,
            Packed::of(self, targets)?,
        ];
        let dims = logits.dims();
        let numel = logits.numel();
        let classes = dims.get(1).copied().unwrap_or(1);
        let inner: usize = dims.iter().skip(2).product();
        let out = GpuBuffer::uninit(self, numel, DType::F32, "cross_entropy")?;
        let (groups, row, span) = grid_spread(numel);
        let mut params = vec![0u32; slot::SPAN + 1];
        params[slot::NUMEL] = numel as u32;
        params[1] = classes as u32;
        params[2] = inner as u32;
        params[slot::ROW] = row;
        params[slot::SPAN] = span;
        for (k, operand) in operands.iter().enumerate() {
            params[slot::OFFSETS + k] = operand.offset as u32;
        }
        let groups = if numel == 0 { [0, 0, 0] } else { groups };
        self.dispatch(
            Module::Elementwise,
            "cross_entropy_grad",
            &params,
            &[
                (1, operands[0].memory().raw()),
                (2, operands[1].memory().raw()),
                (3, operands[2].memory().raw()),
                (4, out.raw()),
            ],
            groups,
        );
        Ok(out)
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
