//! Which nodes each traced op call becomes: the one place that maps the ops' [`OpCall`]s
//! to the emitters of `nodes`.

use super::nodes::*;
use super::trace::{Emit, OP};
use crate::error::{Error, Result};
use crate::ops::hooks::OpCall;
use crate::shape::{normalize_axes, normalize_axis};
use crate::tensor::DynTensor;

/// Writes the nodes of `call` on `operands` (in the order [`OpCall`] names) giving `out`.
pub(super) fn emit(
    e: &mut Emit<'_>,
    call: &OpCall<'_>,
    operands: &[&DynTensor],
    out: &DynTensor,
) -> Result<()> {
    let x = operands
        .first()
        .copied()
        .ok_or_else(|| Error::InvalidArgument {
            op: OP,
            message: "an op without operands cannot be exported".into(),
        })?;
    let second = || operands.get(1).copied().ok_or_else(missing);
    let bias = operands.get(2).copied();
    match *call {
        OpCall::Unary(op) => onnx_unary(e, op, x, out),
        OpCall::Binary(op) => onnx_binary(e, op, x, second()?, out),
        OpCall::Compare(op) => onnx_compare(e, op, x, second()?, out),
        OpCall::Where { condition } => onnx_where(e, condition, x, second()?, out),
        OpCall::And => onnx_plain(e, "And", operands, out),
        OpCall::Not => onnx_plain(e, "Not", operands, out),
        OpCall::MaskedFill { value } => onnx_masked_fill(e, x, second()?, value, out),
        OpCall::MatMul => onnx_plain(e, "MatMul", operands, out),
        OpCall::Product => onnx_product(e, x, second()?, bias, out),
        OpCall::Linear => onnx_linear(e, x, second()?, bias, out),
        OpCall::Conv2d {
            stride,
            padding,
            dilation,
            groups,
        } => {
            let weight = second()?;
            let window = Window {
                kernel: (weight.dims()[2], weight.dims()[3]),
                stride,
                padding,
                dilation,
            };
            onnx_conv2d(e, x, weight, bias, window, groups, out)
        }
        OpCall::ConvTranspose2d {
            stride,
            padding,
            output_padding,
            dilation,
        } => {
            let weight = second()?;
            let window = Window {
                kernel: (weight.dims()[2], weight.dims()[3]),
                stride,
                padding,
                dilation,
            };
            onnx_conv_transpose2d(e, x, weight, bias, window, output_padding, out)
        }
        OpCall::MaxPool2d {
            kernel,
            stride,
            padding,
        } => onnx_max_pool2d(e, x, pool_window(kernel, stride, padding), out),
        OpCall::AvgPool2d {
            kernel,
            stride,
            padding,
            count_include_pad,
        } => {
            let window = pool_window(kernel, stride, padding);
            onnx_avg_pool2d(e, x, window, count_include_pad, out)
        }
        OpCall::AdaptiveAvgPool2d { output_size } => {
            onnx_adaptive_avg_pool2d(e, x, output_size, out)
        }
        OpCall::Contiguous => onnx_plain(e, "Identity", operands, out),
        OpCall::Reshape => onnx_reshape(e, x, out),
        OpCall::Permute { perm } => onnx_permute(e, x, perm, out),
        OpCall::Expand => onnx_expand(e, x, out),
        OpCall::Narrow { axis, start, len } => {
            let axis = normalize_axis(axis, x.rank(), "narrow")?;
            onnx_narrow(e, x, axis, start, len, out)
        }
        OpCall::Softmax { axis, log } => {
            let name = if log { "log_softmax" } else { "softmax" };
            let axis = normalize_axis(axis, x.rank(), name)?;
            onnx_softmax(e, x, axis, log, out)
        }
        OpCall::Reduce {
            axes,
            keepdim,
            mean,
        } => {
            let axes = normalize_axes(axes, x.rank(), if mean { "mean" } else { "sum" })?;
            onnx_reduce(e, x, &axes, keepdim, mean, out)
        }
        OpCall::Extremum { axes, keepdim, max } => {
            let axes = normalize_axes(axes, x.rank(), "max")?;
            onnx_extremum(e, x, &axes, keepdim, max, out)
        }
        OpCall::ArgExtremum { axis, keepdim, max } => {
            let axis = normalize_axis(axis, x.rank(), "argmax")?;
            onnx_arg_extremum(e, x, axis, keepdim, max, out)
        }
        OpCall::Concat { axis } => {
            let axis = normalize_axis(axis, x.rank(), "cat")?;
            onnx_concat(e, operands, axis, out)
        }
        OpCall::Gather { axis, indices } => {
            let axis = normalize_axis(axis, x.rank(), "index_select")?;
            onnx_gather(e, x, indices, axis, out)
        }
        OpCall::Cast => onnx_cast(e, x, out),
        OpCall::LayerNorm { weight, bias, eps } => onnx_layer_norm(e, x, weight, bias, eps, out),
        OpCall::BatchNorm {
            running,
            weight,
            bias,
            training,
            eps,
        } => onnx_batch_norm(e, x, running, (weight, bias), training, eps, out),
        OpCall::Embedding { indices } => onnx_embedding(e, x, indices, out),
    }
}

/// A pooling window (no dilation).
fn pool_window(kernel: (usize, usize), stride: (usize, usize), padding: (usize, usize)) -> Window {
    Window {
        kernel,
        stride,
        padding,
        dilation: (1, 1),
    }
}

/// An op given fewer operands than its call names: a defect of the op, reported as an
/// export error rather than a panic.
fn missing() -> Error {
    Error::InvalidArgument {
        op: OP,
        message: "an op was traced without its second operand".into(),
    }
}
