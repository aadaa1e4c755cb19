//! The ONNX nodes of each exportable op (opset 17), written while a trace runs for the op
//! calls the ops report (`calls` says which op gets which).

use super::proto::Attribute::{Float, Int, Ints};
use super::trace::{Emit, OP};
use crate::error::{Error, Result};
use crate::ops::{BinaryOp, CompareOp, UnaryOp};
use crate::tensor::DynTensor;

fn ints(values: &[usize]) -> Vec<i64> {
    values.iter().map(|&v| v as i64).collect()
}

/// `[top, left, bottom, right]` of a symmetric 2-D padding.
fn pads(padding: (usize, usize)) -> Vec<i64> {
    ints(&[padding.0, padding.1, padding.0, padding.1])
}

fn not_exportable(message: String) -> Error {
    Error::InvalidArgument { op: OP, message }
}

pub(crate) fn onnx_unary(
    e: &mut Emit<'_>,
    op: UnaryOp,
    x: &DynTensor,
    out: &DynTensor,
) -> Result<()> {
    let input = e.input(x)?;
    let simple = match op {
        UnaryOp::Neg => Some("Neg"),
        UnaryOp::Exp => Some("Exp"),
        UnaryOp::Log => Some("Log"),
        UnaryOp::Sqrt => Some("Sqrt"),
        UnaryOp::Abs => Some("Abs"),
        UnaryOp::Sign => Some("Sign"),
        UnaryOp::Erf => Some("Erf"),
        UnaryOp::Sin => Some("Sin"),
        UnaryOp::Cos => Some("Cos"),
        UnaryOp::Floor => Some("Floor"),
        UnaryOp::Relu => Some("Relu"),
        UnaryOp::Sigmoid => Some("Sigmoid"),
        UnaryOp::Tanh => Some("Tanh"),
        _ => None,
    };
    if let Some(op_type) = simple {
        e.single(op_type, vec![input], out, vec![]);
        return Ok(());
    }
    match op {
        UnaryOp::LeakyRelu(slope) => {
            e.single(
                "LeakyRelu",
                vec![input],
                out,
                vec![Float("alpha", slope as f32)],
            );
        }
        UnaryOp::Log1p => {
            // ONNX has no log1p: Log(1 + x), as PyTorch exports it.
            let (one, shifted) = (e.scalar(1.0, x)?, e.temp());
            e.node("Add", vec![input, one], vec![shifted.clone()], vec![]);
            e.single("Log", vec![shifted], out, vec![]);
        }
        UnaryOp::Rsqrt => {
            let root = e.temp();
            e.node("Sqrt", vec![input], vec![root.clone()], vec![]);
            e.single("Reciprocal", vec![root], out, vec![]);
        }
        UnaryOp::Gelu => {
            // x * 0.5 * (1 + erf(x / sqrt(2))), as PyTorch exports GELU before opset 20.
            let (scaled, erf, shifted, product) = (e.temp(), e.temp(), e.temp(), e.temp());
            let root2 = e.scalar(std::f64::consts::SQRT_2, x)?;
            let one = e.scalar(1.0, x)?;
            let half = e.scalar(0.5, x)?;
            e.node(
                "Div",
                vec![input.clone(), root2],
                vec![scaled.clone()],
                vec![],
            );
            e.node("Erf", vec![scaled], vec![erf.clone()], vec![]);
            e.node("Add", vec![erf, one], vec![shifted.clone()], vec![]);
            e.node("Mul", vec![input, shifted], vec![product.clone()], vec![]);
            e.single("Mul", vec![product, half], out, vec![]);
        }
        UnaryOp::GeluTanh => {
            // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
            let names: Vec<String> = (0..7).map(|_| e.temp()).collect();
            let three = e.scalar(3.0, x)?;
            let c = e.scalar(0.044715, x)?;
            let k = e.scalar((2.0 / std::f64::consts::PI).sqrt(), x)?;
            let one = e.scalar(1.0, x)?;
            let half = e.scalar(0.5, x)?;
            e.node(
                "Pow",
                vec![input.clone(), three],
                vec![names[0].clone()],
                vec![],
            );
            e.node(
                "Mul",
                vec![names[0].clone(), c],
                vec![names[1].clone()],
                vec![],
            );
            e.node(
                "Add",
                vec![input.clone(), names[1].clone()],
                vec![names[2].clone()],
                vec![],
            );
            e.node(
                "Mul",
                vec![names[2].clone(), k],
                vec![names[3].clone()],
                vec![],
            );
            e.node(
                "Tanh",
                vec![names[3].clone()],
                vec![names[4].clone()],
                vec![],
            );
            e.node(
                "Add",
                vec![names[4].clone(), one],
                vec![names[5].clone()],
                vec![],
            );
            e.node(
                "Mul",
                vec![input, names[5].clone()],
                vec![names[6].clone()],
                vec![],
            );
            e.single("Mul", vec![names[6].clone(), half], out, vec![]);
        }
        UnaryOp::Silu => {
            let gate = e.temp();
            e.node("Sigmoid", vec![input.clone()], vec![gate.clone()], vec![]);
            e.single("Mul", vec![input, gate], out, vec![]);
        }
        UnaryOp::Softplus { beta, .. } => {
            // ONNX's Softplus has no threshold: above it the two differ by < e^-threshold.
            let (scaled, soft) = (e.temp(), e.temp());
            let b = e.scalar(beta, x)?;
            e.node("Mul", vec![input, b.clone()], vec![scaled.clone()], vec![]);
            e.node("Softplus", vec![scaled], vec![soft.clone()], vec![]);
            e.single("Div", vec![soft, b], out, vec![]);
        }
        UnaryOp::Powf(exponent) => {
            let p = e.scalar(exponent, x)?;
            e.single("Pow", vec![input, p], out, vec![]);
        }
        UnaryOp::Clamp { min, max } => {
            let (lo, hi) = (e.scalar(min, x)?, e.scalar(max, x)?);
            e.single("Clip", vec![input, lo, hi], out, vec![]);
        }
        UnaryOp::AddScalar(value) => {
            let c = e.scalar(value, x)?;
            e.single("Add", vec![input, c], out, vec![]);
        }
        UnaryOp::MulScalar(value) => {
            let c = e.scalar(value, x)?;
            e.single("Mul", vec![input, c], out, vec![]);
        }
        _ => unreachable!("the simple ops are handled above"),
    }
    Ok(())
}

pub(crate) fn onnx_binary(
    e: &mut Emit<'_>,
    op: BinaryOp,
    a: &DynTensor,
    b: &DynTensor,
    out: &DynTensor,
) -> Result<()> {
    let op_type = match op {
        BinaryOp::Add => "Add",
        BinaryOp::Sub => "Sub",
        BinaryOp::Mul => "Mul",
        BinaryOp::Div => "Div",
        BinaryOp::Pow => "Pow",
    };
    let inputs = vec![e.input(a)?, e.input(b)?];
    e.single(op_type, inputs, out, vec![]);
    Ok(())
}

pub(crate) fn onnx_compare(
    e: &mut Emit<'_>,
    op: CompareOp,
    a: &DynTensor,
    b: &DynTensor,
    out: &DynTensor,
) -> Result<()> {
    let inputs = vec![e.input(a)?, e.input(b)?];
    let op_type = match op {
        CompareOp::Eq | CompareOp::Ne => "Equal",
        CompareOp::Lt => "Less",
        CompareOp::Le => "LessOrEqual",
        CompareOp::Gt => "Greater",
        CompareOp::Ge => "GreaterOrEqual",
    };
    if op == CompareOp::Ne {
        let equal = e.temp();
        e.node(op_type, inputs, vec![equal.clone()], vec![]);
        e.single("Not", vec![equal], out, vec![]);
    } else {
        e.single(op_type, inputs, out, vec![]);
    }
    Ok(())
}

/// One node `op_type` of the inputs, no attributes.
pub(crate) fn onnx_plain(
    e: &mut Emit<'_>,
    op_type: &'static str,
    inputs: &[&DynTensor],
    out: &DynTensor,
) -> Result<()> {
    let names = inputs.iter().map(|t| e.input(t)).collect::<Result<_>>()?;
    e.single(op_type, names, out, vec![]);
    Ok(())
}

/// `a @ b (+ bias)`, the bias along the last axis: `MatMul` and an `Add`.
pub(crate) fn onnx_product(
    e: &mut Emit<'_>,
    a: &DynTensor,
    b: &DynTensor,
    bias: Option<&DynTensor>,
    out: &DynTensor,
) -> Result<()> {
    let Some(bias) = bias else {
        return onnx_plain(e, "MatMul", &[a, b], out);
    };
    let (product, inputs) = (e.temp(), vec![e.input(a)?, e.input(b)?]);
    e.node("MatMul", inputs, vec![product.clone()], vec![]);
    let bias = e.input(bias)?;
    e.single("Add", vec![product, bias], out, vec![]);
    Ok(())
}

/// `x @ weight^T + bias` as PyTorch exports `nn.Linear`: one `Gemm` for a matrix input,
/// else `MatMul` with the transposed weight and an `Add`.
pub(crate) fn onnx_linear(
    e: &mut Emit<'_>,
    x: &DynTensor,
    weight: &DynTensor,
    bias: Option<&DynTensor>,
    out: &DynTensor,
) -> Result<()> {
    let (input, w) = (e.input(x)?, e.input(weight)?);
    if x.rank() == 2 {
        let mut inputs = vec![input, w];
        if let Some(bias) = bias {
            inputs.push(e.input(bias)?);
        }
        e.single("Gemm", inputs, out, vec![Int("transB", 1)]);
        return Ok(());
    }
    let transposed = e.temp();
    e.node(
        "Transpose",
        vec![w],
        vec![transposed.clone()],
        vec![Ints("perm", vec![1, 0])],
    );
    match bias {
        None => e.single("MatMul", vec![input, transposed], out, vec![]),
        Some(bias) => {
            let (product, b) = (e.temp(), e.input(bias)?);
            e.node(
                "MatMul",
                vec![input, transposed],
                vec![product.clone()],
                vec![],
            );
            e.single("Add", vec![product, b], out, vec![]);
        }
    }
    Ok(())
}

/// The window options shared by convolutions and pools.
pub(crate) struct Window {
    pub kernel: (usize, usize),
    pub stride: (usize, usize),
    pub padding: (usize, usize),
    pub dilation: (usize, usize),
}

impl Window {
    fn attributes(&self) -> Vec<super::proto::Attribute> {
        vec![
            Ints("kernel_shape", ints(&[self.kernel.0, self.kernel.1])),
            Ints("strides", ints(&[self.stride.0, self.stride.1])),
            Ints("pads", pads(self.padding)),
            Ints("dilations", ints(&[self.dilation.0, self.dilation.1])),
        ]
    }
}

pub(crate) fn onnx_conv2d(
    e: &mut Emit<'_>,
    x: &DynTensor,
    weight: &DynTensor,
    bias: Option<&DynTensor>,
    window: Window,
    groups: usize,
    out: &DynTensor,
) -> Result<()> {
    let inputs = vec![e.input(x)?, e.input(weight)?, e.optional(bias)?];
    let mut attributes = window.attributes();
    attributes.push(Int("group", groups as i64));
    e.single("Conv", inputs, out, attributes);
    Ok(())
}

pub(crate) fn onnx_max_pool2d(
    e: &mut Emit<'_>,
    x: &DynTensor,
    window: Window,
    out: &DynTensor,
) -> Result<()> {
    let input = e.input(x)?;
    e.single("MaxPool", vec![input], out, window.attributes());
    Ok(())
}

/// `AveragePool` (no dilation attribute before opset 19).
pub(crate) fn onnx_avg_pool2d(
    e: &mut Emit<'_>,
    x: &DynTensor,
    window: Window,
    count_include_pad: bool,
    out: &DynTensor,
) -> Result<()> {
    let input = e.input(x)?;
    let mut attributes = window.attributes();
    attributes.pop();
    attributes.push(Int("count_include_pad", i64::from(count_include_pad)));
    e.single("AveragePool", vec![input], out, attributes);
    Ok(())
}

/// `GlobalAveragePool` for a 1x1 output, an `AveragePool` when the windows tile the input
/// evenly; other sizes have no single ONNX op.
pub(crate) fn onnx_adaptive_avg_pool2d(
    e: &mut Emit<'_>,
    x: &DynTensor,
    output_size: (usize, usize),
    out: &DynTensor,
) -> Result<()> {
    let input = e.input(x)?;
    if output_size == (1, 1) {
        e.single("GlobalAveragePool", vec![input], out, vec![]);
        return Ok(());
    }
    let (h, w) = (x.dims()[2], x.dims()[3]);
    if h % output_size.0 != 0 || w % output_size.1 != 0 {
        return Err(not_exportable(format!(
            "adaptive_avg_pool2d from {h}x{w} to {}x{} has uneven windows, which ONNX has no \
             op for; pool to a size that divides the input",
            output_size.0, output_size.1
        )));
    }
    let kernel = (h / output_size.0, w / output_size.1);
    let window = Window {
        kernel,
        stride: kernel,
        padding: (0, 0),
        dilation: (1, 1),
    };
    let mut attributes = window.attributes();
    attributes.pop();
    e.single("AveragePool", vec![input], out, attributes);
    Ok(())
}

/// A reshape to `out`'s shape: `Flatten` where it joins the leading and the trailing axes
/// into two (as `nn.Flatten` and a `[B, T, C]` to `[B * T, C]` do), which holds at every size
/// of those axes; otherwise `Reshape` to the traced shape (a dynamic export computes its
/// target from the input's shape).
pub(crate) fn onnx_reshape(e: &mut Emit<'_>, x: &DynTensor, out: &DynTensor) -> Result<()> {
    let input = e.input(x)?;
    if let Some(axis) = flatten_axis(x.dims(), out.dims()) {
        e.single("Flatten", vec![input], out, vec![Int("axis", axis as i64)]);
        return Ok(());
    }
    let shape = e.ints(&ints(out.dims()))?;
    e.single("Reshape", vec![input, shape], out, vec![]);
    Ok(())
}

/// The axis `a` (at least 1) with `to == [prod(from[..a]), prod(from[a..])]`, if any.
fn flatten_axis(from: &[usize], to: &[usize]) -> Option<usize> {
    let &[rows, columns] = to else {
        return None;
    };
    (1..from.len()).find(|&a| {
        from[..a].iter().product::<usize>() == rows
            && from[a..].iter().product::<usize>() == columns
    })
}

pub(crate) fn onnx_permute(
    e: &mut Emit<'_>,
    x: &DynTensor,
    perm: &[usize],
    out: &DynTensor,
) -> Result<()> {
    let input = e.input(x)?;
    e.single(
        "Transpose",
        vec![input],
        out,
        vec![Ints("perm", ints(perm))],
    );
    Ok(())
}

/// `len` elements from `start` along `axis`: a `Slice`.
pub(crate) fn onnx_narrow(
    e: &mut Emit<'_>,
    x: &DynTensor,
    axis: usize,
    start: usize,
    len: usize,
    out: &DynTensor,
) -> Result<()> {
    let input = e.input(x)?;
    let starts = e.ints(&[start as i64])?;
    let ends = e.ints(&[(start + len) as i64])?;
    let axes = e.ints(&[axis as i64])?;
    e.single("Slice", vec![input, starts, ends, axes], out, vec![]);
    Ok(())
}

pub(crate) fn onnx_expand(e: &mut Emit<'_>, x: &DynTensor, out: &DynTensor) -> Result<()> {
    let input = e.input(x)?;
    let shape = e.ints(&ints(out.dims()))?;
    e.single("Expand", vec![input, shape], out, vec![]);
    Ok(())
}

pub(crate) fn onnx_softmax(
    e: &mut Emit<'_>,
    x: &DynTensor,
    axis: usize,
    log: bool,
    out: &DynTensor,
) -> Result<()> {
    let input = e.input(x)?;
    let op_type = if log { "LogSoftmax" } else { "Softmax" };
    e.single(op_type, vec![input], out, vec![Int("axis", axis as i64)]);
    Ok(())
}

/// `ReduceSum` (axes as an input since opset 13) or `ReduceMean` (axes an attribute until
/// opset 18).
pub(crate) fn onnx_reduce(
    e: &mut Emit<'_>,
    x: &DynTensor,
    axes: &[usize],
    keepdim: bool,
    mean: bool,
    out: &DynTensor,
) -> Result<()> {
    let input = e.input(x)?;
    let keep = Int("keepdims", i64::from(keepdim));
    if mean {
        e.single(
            "ReduceMean",
            vec![input],
            out,
            vec![Ints("axes", ints(axes)), keep],
        );
    } else {
        let axes = e.ints(&ints(axes))?;
        e.single("ReduceSum", vec![input, axes], out, vec![keep]);
    }
    Ok(())
}

pub(crate) fn onnx_concat(
    e: &mut Emit<'_>,
    tensors: &[&DynTensor],
    axis: usize,
    out: &DynTensor,
) -> Result<()> {
    let inputs = tensors.iter().map(|t| e.input(t)).collect::<Result<_>>()?;
    e.single("Concat", inputs, out, vec![Int("axis", axis as i64)]);
    Ok(())
}

/// `where(mask, value, x)`.
pub(crate) fn onnx_masked_fill(
    e: &mut Emit<'_>,
    x: &DynTensor,
    mask: &DynTensor,
    value: f64,
    out: &DynTensor,
) -> Result<()> {
    let (input, condition) = (e.input(x)?, e.input(mask)?);
    let fill = e.scalar(value, x)?;
    e.single("Where", vec![condition, fill, input], out, vec![]);
    Ok(())
}

pub(crate) fn onnx_where(
    e: &mut Emit<'_>,
    condition: &DynTensor,
    on_true: &DynTensor,
    on_false: &DynTensor,
    out: &DynTensor,
) -> Result<()> {
    let inputs = vec![e.input(condition)?, e.input(on_true)?, e.input(on_false)?];
    e.single("Where", inputs, out, vec![]);
    Ok(())
}

/// Rows of `weight` picked by `indices`: `Gather` on axis 0.
pub(crate) fn onnx_embedding(
    e: &mut Emit<'_>,
    weight: &DynTensor,
    indices: &DynTensor,
    out: &DynTensor,
) -> Result<()> {
    onnx_gather(e, weight, indices, 0, out)
}

/// Entries of `x` at `indices` along `axis` (`index_select`).
pub(crate) fn onnx_gather(
    e: &mut Emit<'_>,
    x: &DynTensor,
    indices: &DynTensor,
    axis: usize,
    out: &DynTensor,
) -> Result<()> {
    let inputs = vec![e.input(x)?, e.input(indices)?];
    e.single("Gather", inputs, out, vec![Int("axis", axis as i64)]);
    Ok(())
}

/// `ReduceMax` / `ReduceMin` (axes an attribute until opset 18).
pub(crate) fn onnx_extremum(
    e: &mut Emit<'_>,
    x: &DynTensor,
    axes: &[usize],
    keepdim: bool,
    max: bool,
    out: &DynTensor,
) -> Result<()> {
    let input = e.input(x)?;
    let op_type = if max { "ReduceMax" } else { "ReduceMin" };
    let attributes = vec![
        Ints("axes", ints(axes)),
        Int("keepdims", i64::from(keepdim)),
    ];
    e.single(op_type, vec![input], out, attributes);
    Ok(())
}

/// `ArgMax` / `ArgMin`, the first extreme index as in rumus.
pub(crate) fn onnx_arg_extremum(
    e: &mut Emit<'_>,
    x: &DynTensor,
    axis: usize,
    keepdim: bool,
    max: bool,
    out: &DynTensor,
) -> Result<()> {
    let input = e.input(x)?;
    let op_type = if max { "ArgMax" } else { "ArgMin" };
    let attributes = vec![
        Int("axis", axis as i64),
        Int("keepdims", i64::from(keepdim)),
        Int("select_last_index", 0),
    ];
    e.single(op_type, vec![input], out, attributes);
    Ok(())
}

/// `ConvTranspose` with the weight `[C_in, C_out, KH, KW]`, as PyTorch stores it.
pub(crate) fn onnx_conv_transpose2d(
    e: &mut Emit<'_>,
    x: &DynTensor,
    weight: &DynTensor,
    bias: Option<&DynTensor>,
    window: Window,
    output_padding: (usize, usize),
    out: &DynTensor,
) -> Result<()> {
    let inputs = vec![e.input(x)?, e.input(weight)?, e.optional(bias)?];
    let mut attributes = window.attributes();
    attributes.push(Ints(
        "output_padding",
        ints(&[output_padding.0, output_padding.1]),
    ));
    e.single("ConvTranspose", inputs, out, attributes);
    Ok(())
}

/// `BatchNormalization` in inference mode (running statistics); batch statistics (a model in
/// training mode) have no inference form.
pub(crate) fn onnx_batch_norm(
    e: &mut Emit<'_>,
    x: &DynTensor,
    running: Option<(&DynTensor, &DynTensor)>,
    affine: (Option<&DynTensor>, Option<&DynTensor>),
    training: bool,
    eps: f64,
    out: &DynTensor,
) -> Result<()> {
    let running = match running {
        Some(running) if !training => running,
        _ => {
            return Err(not_exportable(
                "batch_norm with batch statistics (training mode, or no running statistics) \
                 cannot be exported; call `model.eval()` before exporting"
                    .into(),
            ));
        }
    };
    let channels = x.dims()[1];
    let constant = |value: f64| DynTensor::full(&[channels], value, x.dtype());
    let input = e.input(x)?;
    let scale = match affine.0 {
        Some(weight) => e.input(weight)?,
        None => e.input(&constant(1.0)?)?,
    };
    let shift = match affine.1 {
        Some(bias) => e.input(bias)?,
        None => e.input(&constant(0.0)?)?,
    };
    let (mean, var) = (e.input(running.0)?, e.input(running.1)?);
    e.single(
        "BatchNormalization",
        vec![input, scale, shift, mean, var],
        out,
        vec![Float("epsilon", eps as f32)],
    );
    Ok(())
}

/// `LayerNormalization` over the last axis (opset 17).
pub(crate) fn onnx_layer_norm(
    e: &mut Emit<'_>,
    x: &DynTensor,
    weight: Option<&DynTensor>,
    bias: Option<&DynTensor>,
    eps: f64,
    out: &DynTensor,
) -> Result<()> {
    let d = *x.dims().last().unwrap_or(&1);
    let input = e.input(x)?;
    let scale = match weight {
        Some(weight) => e.input(weight)?,
        None => e.input(&DynTensor::full(&[d], 1.0, x.dtype())?)?,
    };
    let shift = e.optional(bias)?;
    e.single(
        "LayerNormalization",
        vec![input, scale, shift],
        out,
        vec![Int("axis", -1), Float("epsilon", eps as f32)],
    );
    Ok(())
}

pub(crate) fn onnx_cast(e: &mut Emit<'_>, x: &DynTensor, out: &DynTensor) -> Result<()> {
    let input = e.input(x)?;
    let to = super::proto::elem_type(out.dtype());
    e.single("Cast", vec![input], out, vec![Int("to", to)]);
    Ok(())
}
