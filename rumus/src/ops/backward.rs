//! The table of derivatives: the closed set of backward records of rumus's own ops. A record
//! holds exactly what its gradient formula needs (input dims for un-broadcasting, saved
//! tensors with their versions); it is plain data: inspectable, `Send + Sync`, no boxed
//! closures. The formulas live next to their forward ops and are written with the same
//! differentiable ops, so recording the backward pass (`create_graph`) yields higher-order
//! gradients. The tape ([`crate::autograd`]) holds records as [`BackwardRecord`] trait
//! objects, so it names no op; layers above `ops` (a fused loss, an autocast product, a
//! checkpointed segment) implement that trait for records of their own.

use smallvec::{SmallVec, smallvec};

use super::{
    attention, conv, custom, direct_conv, dropout, elementwise, index, join, matmul, norm, reduce,
    softmax, unary, view,
};
use crate::autograd::{BackwardRecord, GraphLinks, Saved};
use crate::backend::cpu::direct_conv::Conv2dShape;
use crate::backend::cpu::simd::Isa;
use crate::backend::cpu::unfold::Window2d;
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Dims;
use crate::tensor::DynTensor;

/// One op on the tape and what its gradient needs.
///
/// Inputs are numbered in the order the forward op received them; `needs[i]` in the backward
/// pass refers to that order.
pub enum BackwardOp {
    /// Broadcasting `lhs + rhs`.
    Add {
        /// Shape of `lhs`, to sum the gradient back to it.
        lhs_dims: Dims,
        /// Shape of `rhs`, to sum the gradient back to it.
        rhs_dims: Dims,
    },
    /// Broadcasting `lhs - rhs`.
    Sub {
        /// Shape of `lhs`, to sum the gradient back to it.
        lhs_dims: Dims,
        /// Shape of `rhs`, to sum the gradient back to it.
        rhs_dims: Dims,
    },
    /// Broadcasting `lhs * rhs`.
    Mul {
        /// The left operand; its value scales the gradient of `rhs`.
        lhs: Saved,
        /// The right operand; its value scales the gradient of `lhs`.
        rhs: Saved,
    },
    /// Broadcasting `lhs / rhs`.
    Div {
        /// The numerator.
        lhs: Saved,
        /// The denominator.
        rhs: Saved,
    },
    /// Broadcasting `base ^ exponent`, both tensors.
    Pow {
        /// The base.
        base: Saved,
        /// The exponent.
        exponent: Saved,
    },
    /// `where(condition, on_true, on_false)`; inputs (on_true, on_false).
    Where {
        /// The `bool` mask, detached; picks which input each gradient element goes to.
        condition: DynTensor,
        /// Shape of `on_true`.
        lhs_dims: Dims,
        /// Shape of `on_false`.
        rhs_dims: Dims,
    },
    /// An element-wise unary op (`exp`, `relu`, a scalar multiply, ...).
    Unary {
        /// Which op ran.
        op: unary::UnaryOp,
        /// The input, kept only for ops whose derivative reads it.
        input: Option<Saved>,
    },
    /// Sum over `axes`.
    Sum {
        /// Shape of the input, to broadcast the gradient back to.
        input_dims: Dims,
        /// The reduced axes, normalised to be non-negative.
        axes: Vec<usize>,
        /// Whether the reduced axes were kept with size 1.
        keepdim: bool,
    },
    /// Max or min over `axes`; ties share the gradient equally.
    Extremum {
        /// The input, to find where the extreme values were.
        input: Saved,
        /// The reduced axes, normalised to be non-negative.
        axes: Vec<usize>,
        /// Whether the reduced axes were kept with size 1.
        keepdim: bool,
        /// `true` for max, `false` for min.
        max: bool,
    },
    /// Softmax or log-softmax along one axis.
    Softmax {
        /// The input of the op.
        input: Saved,
        /// The normalised axis.
        axis: usize,
        /// `true` for log-softmax.
        log: bool,
    },
    /// Batched matrix product `lhs @ rhs`, with broadcast batch dims.
    Matmul {
        /// The left matrix (or batch of matrices).
        lhs: Saved,
        /// The right matrix (or batch of matrices).
        rhs: Saved,
    },
    /// `input @ weight_t + bias`; inputs (input, weight_t, bias).
    Linear {
        /// The input.
        input: Saved,
        /// The right operand (for a linear layer, its weight transposed).
        weight_t: Saved,
        /// Shape of the bias, to sum the gradient back to it.
        bias_dims: Dims,
    },
    /// A reshape; the gradient is reshaped back.
    Reshape {
        /// Shape of the input.
        input_dims: Dims,
    },
    /// An axis permutation; the gradient is permuted by the inverse.
    Permute {
        /// The permutation that was applied.
        perm: Vec<usize>,
    },
    /// A broadcast (`broadcast_to`); the gradient is summed back.
    Expand {
        /// Shape of the input before broadcasting.
        input_dims: Dims,
    },
    /// A narrowing view along one axis; the gradient is zero-padded back.
    Narrow {
        /// Shape of the input.
        input_dims: Dims,
        /// The narrowed axis.
        axis: usize,
        /// First index kept along `axis`.
        start: usize,
    },
    /// A contiguous copy; the gradient passes through unchanged.
    Contiguous,
    /// `index_select` along one axis; the gradient is added back at the indices.
    IndexSelect {
        /// Shape of the input.
        input_dims: Dims,
        /// The indexed axis.
        axis: usize,
        /// The indices, detached.
        indices: DynTensor,
    },
    /// `index_add` along one axis; inputs (self, source).
    IndexAdd {
        /// The indexed axis.
        axis: usize,
        /// The indices, detached.
        indices: DynTensor,
    },
    /// `gather` along one axis (PyTorch `gather`).
    Gather {
        /// Shape of the input.
        input_dims: Dims,
        /// The indexed axis.
        axis: usize,
        /// The indices, detached.
        indices: DynTensor,
    },
    /// `scatter_add` along one axis (PyTorch `scatter_add`); inputs (self, source).
    ScatterAdd {
        /// The indexed axis.
        axis: usize,
        /// The indices, detached.
        indices: DynTensor,
    },
    /// Concatenation along one axis; the gradient is split back into pieces.
    Cat {
        /// The concatenation axis.
        axis: usize,
        /// Each input's length along `axis`, in input order.
        sizes: Vec<usize>,
    },
    /// A dtype conversion; the gradient is converted back.
    Cast {
        /// The input's dtype.
        from: DType,
    },
    /// A copy between devices; the gradient goes back to where the input was.
    ToDevice {
        /// The device the input was on.
        from: crate::Device,
    },
    /// A convolution run by the CPU's direct kernels (`x`, `w` and an optional bias in).
    Conv2d {
        /// The input `x`, `[N, C, H, W]`.
        input: Saved,
        /// The weight `w`, `[OC, C, KH, KW]`.
        weight: Saved,
        /// Sizes of the convolution: batch, channels, plane, kernel and padding.
        shape: Conv2dShape,
        /// The vector instruction set the forward pass used; the backward uses the same.
        isa: Isa,
    },
    /// Dropout with its draws hashed from `seed` (no mask kept), on the CPU or a GPU.
    Dropout {
        /// Probability that an element is zeroed.
        p: f64,
        /// Seed of the keep-or-drop draws, replayed on the gradient.
        seed: u64,
    },
    /// An activation and dropout after it as one op (`ops::dropout`).
    ActivationDropout {
        /// The activation.
        op: unary::UnaryOp,
        /// The activation's input.
        input: Saved,
        /// Probability that an element is zeroed.
        p: f64,
        /// Seed of the keep-or-drop draws, replayed on the gradient.
        seed: u64,
    },
    /// Layer normalisation over the last axis (`x`, then the weight and bias when present).
    LayerNorm {
        /// The input `x`.
        input: Saved,
        /// The scale, when the layer has one.
        weight: Option<Saved>,
        /// Whether a bias was an input (the last one).
        has_bias: bool,
        /// Each row's mean and `1 / sqrt(var + eps)`, `[rows, 2]`, for the fused backward.
        stats: DynTensor,
        /// The `eps` added to the variance.
        eps: f64,
    },
    /// Sliding windows copied into columns (im2col); the adjoint of `Fold2d`.
    Unfold2d {
        /// Kernel, stride, padding, dilation and plane sizes of the windows.
        window: Window2d,
    },
    /// Columns summed back into planes (col2im); the adjoint of `Unfold2d`.
    Fold2d {
        /// Kernel, stride, padding, dilation and plane sizes of the windows.
        window: Window2d,
    },
    /// The sum of each sliding window (average pooling); the adjoint of `WindowSpread2d`.
    WindowSum2d {
        /// Kernel, stride, padding, dilation and plane sizes of the windows.
        window: Window2d,
    },
    /// Each window's value added to all its inputs; the adjoint of `WindowSum2d`.
    WindowSpread2d {
        /// Kernel, stride, padding, dilation and plane sizes of the windows.
        window: Window2d,
    },
    /// An op defined outside rumus ([`crate::ops::custom::CustomOp`]).
    Custom(Box<custom::CustomRecord>),
    /// Fused scaled dot-product attention; inputs (query, key, value).
    Attention(Box<attention::AttentionRecord>),
}

impl BackwardRecord for BackwardOp {
    fn name(&self) -> &'static str {
        match self {
            BackwardOp::Add { .. } => "add",
            BackwardOp::Sub { .. } => "sub",
            BackwardOp::Mul { .. } => "mul",
            BackwardOp::Div { .. } => "div",
            BackwardOp::Pow { .. } => "pow",
            BackwardOp::Where { .. } => "where",
            BackwardOp::Unary { op, .. } => op.name(),
            BackwardOp::Sum { .. } => "sum",
            BackwardOp::Extremum { max: true, .. } => "max",
            BackwardOp::Extremum { max: false, .. } => "min",
            BackwardOp::Softmax { log: false, .. } => "softmax",
            BackwardOp::Softmax { log: true, .. } => "log_softmax",
            BackwardOp::Matmul { .. } => "matmul",
            BackwardOp::Linear { .. } => "linear",
            BackwardOp::Reshape { .. } => "reshape",
            BackwardOp::Permute { .. } => "permute",
            BackwardOp::Expand { .. } => "broadcast_to",
            BackwardOp::Narrow { .. } => "narrow",
            BackwardOp::Contiguous => "contiguous",
            BackwardOp::IndexSelect { .. } => "index_select",
            BackwardOp::IndexAdd { .. } => "index_add",
            BackwardOp::Gather { .. } => "gather",
            BackwardOp::ScatterAdd { .. } => "scatter_add",
            BackwardOp::Cat { .. } => "cat",
            BackwardOp::Cast { .. } => "to_dtype",
            BackwardOp::ToDevice { .. } => "to",
            BackwardOp::Conv2d { .. } => "conv2d",
            BackwardOp::Dropout { .. } | BackwardOp::ActivationDropout { .. } => "dropout",
            BackwardOp::LayerNorm { .. } => "layer_norm",
            BackwardOp::Unfold2d { .. } => "unfold2d",
            BackwardOp::Fold2d { .. } => "fold2d",
            BackwardOp::WindowSum2d { .. } => "window_sum2d",
            BackwardOp::WindowSpread2d { .. } => "window_spread2d",
            BackwardOp::Custom(record) => record.name(),
            BackwardOp::Attention(_) => "scaled_dot_product_attention",
        }
    }

    fn take_graph(&mut self, links: &mut GraphLinks) {
        self.take_saved()
            .into_iter()
            .for_each(|tensor| links.push_tensor(tensor));
    }

    fn backward(&self, grad: &DynTensor, needs: &[bool]) -> Result<Vec<Option<DynTensor>>> {
        let one = |g: Result<DynTensor>| g.map(|g| vec![Some(g)]);
        match self {
            BackwardOp::Add { lhs_dims, rhs_dims } => {
                elementwise::add_backward(grad, lhs_dims, rhs_dims, false)
            }
            BackwardOp::Sub { lhs_dims, rhs_dims } => {
                elementwise::add_backward(grad, lhs_dims, rhs_dims, true)
            }
            BackwardOp::Mul { lhs, rhs } => elementwise::mul_backward(grad, lhs, rhs, needs),
            BackwardOp::Div { lhs, rhs } => elementwise::div_backward(grad, lhs, rhs, needs),
            BackwardOp::Pow { base, exponent } => {
                elementwise::pow_backward(grad, base, exponent, needs)
            }
            BackwardOp::Where {
                condition,
                lhs_dims,
                rhs_dims,
            } => elementwise::where_backward(grad, condition, lhs_dims, rhs_dims, needs),
            BackwardOp::Unary { op, input } => {
                one(unary::unary_backward(grad, *op, input.as_ref()))
            }
            BackwardOp::Sum {
                input_dims,
                axes,
                keepdim,
            } => one(reduce::sum_backward(grad, input_dims, axes, *keepdim)),
            BackwardOp::Extremum {
                input,
                axes,
                keepdim,
                max,
            } => one(reduce::extremum_backward(grad, input, axes, *keepdim, *max)),
            BackwardOp::Softmax { input, axis, log } => {
                one(softmax::softmax_backward(grad, input, *axis, *log))
            }
            BackwardOp::Matmul { lhs, rhs } => matmul::matmul_backward(grad, lhs, rhs, needs),
            BackwardOp::Linear {
                input,
                weight_t,
                bias_dims,
            } => matmul::linear_backward(grad, (input, weight_t), bias_dims, needs),
            BackwardOp::Reshape { input_dims } => one(grad.reshape(input_dims)),
            BackwardOp::Permute { perm } => one(grad.permute(&view::inverse_permutation(perm))),
            BackwardOp::Expand { input_dims } => one(grad.sum_to(input_dims)),
            BackwardOp::Narrow {
                input_dims,
                axis,
                start,
            } => one(view::narrow_backward(grad, input_dims, *axis, *start)),
            BackwardOp::Contiguous => Ok(vec![Some(grad.clone())]),
            BackwardOp::IndexSelect {
                input_dims,
                axis,
                indices,
            } => one(index::indexed_read_backward(
                grad,
                input_dims,
                (*axis, indices),
                DynTensor::index_add,
            )),
            BackwardOp::IndexAdd { axis, indices } => {
                index::indexed_add_backward(grad, (*axis, indices), needs, DynTensor::index_select)
            }
            BackwardOp::Gather {
                input_dims,
                axis,
                indices,
            } => one(index::indexed_read_backward(
                grad,
                input_dims,
                (*axis, indices),
                DynTensor::scatter_add,
            )),
            BackwardOp::ScatterAdd { axis, indices } => {
                index::indexed_add_backward(grad, (*axis, indices), needs, DynTensor::gather)
            }
            BackwardOp::Cat { axis, sizes } => join::cat_backward(grad, *axis, sizes, needs),
            BackwardOp::Cast { from } => one(grad.to_dtype(*from)),
            BackwardOp::ToDevice { from } => one(grad.to(from)),
            BackwardOp::Conv2d {
                input,
                weight,
                shape,
                isa,
            } => direct_conv::conv2d_backward(grad, input, weight, shape, *isa, needs),
            BackwardOp::Dropout { p, seed } => one(dropout::dropout_backward(grad, *p, *seed)),
            BackwardOp::ActivationDropout { op, input, p, seed } => one(
                dropout::activation_dropout_backward(grad, *op, input, *p, *seed),
            ),
            BackwardOp::LayerNorm {
                input,
                weight,
                has_bias,
                stats,
                eps,
            } => norm::layer_norm_backward(
                grad,
                input,
                weight.as_ref(),
                *has_bias,
                (stats, *eps),
                needs,
            ),
            BackwardOp::Unfold2d { window } => one(conv::unfold2d_backward(grad, window)),
            BackwardOp::Fold2d { window } => one(conv::fold2d_backward(grad, window)),
            BackwardOp::WindowSum2d { window } => one(conv::window_sum2d_backward(grad, window)),
            BackwardOp::WindowSpread2d { window } => {
                one(conv::window_spread2d_backward(grad, window))
            }
            BackwardOp::Custom(record) => custom::custom_backward(record, grad, needs),
            BackwardOp::Attention(record) => attention::attention_backward(record, grad, needs),
        }
    }
}

impl BackwardOp {
    /// Moves out the tensors this record saved (they may hold graph nodes), so a dropping
    /// graph can be freed iteratively.
    fn take_saved(&mut self) -> SmallVec<[DynTensor; 2]> {
        match std::mem::replace(self, BackwardOp::Contiguous) {
            BackwardOp::Mul { lhs, rhs }
            | BackwardOp::Div { lhs, rhs }
            | BackwardOp::Matmul { lhs, rhs }
            | BackwardOp::Linear {
                input: lhs,
                weight_t: rhs,
                ..
            }
            | BackwardOp::Conv2d {
                input: lhs,
                weight: rhs,
                ..
            } => {
                smallvec![lhs.into_tensor(), rhs.into_tensor()]
            }
            BackwardOp::Pow { base, exponent } => {
                smallvec![base.into_tensor(), exponent.into_tensor()]
            }
            BackwardOp::Unary {
                input: Some(input), ..
            }
            | BackwardOp::ActivationDropout { input, .. }
            | BackwardOp::Extremum { input, .. }
            | BackwardOp::Softmax { input, .. } => smallvec![input.into_tensor()],
            BackwardOp::LayerNorm { input, weight, .. } => std::iter::once(input)
                .chain(weight)
                .map(Saved::into_tensor)
                .collect(),
            BackwardOp::Custom(record) => record.take_saved().collect(),
            BackwardOp::Attention(record) => record.take_saved().collect(),
            _ => SmallVec::new(),
        }
    }
}
