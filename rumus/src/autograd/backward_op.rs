//! The closed set of backward records. A record holds exactly what its gradient formula needs
//! (input dims for un-broadcasting, saved tensors with their versions); it is plain data:
//! inspectable, `Send + Sync`, no boxed closures. The formulas live next to their forward ops
//! in `crate::ops` and are written with the same differentiable ops, so recording the
//! backward pass (`create_graph`) yields higher-order gradients.

use smallvec::{SmallVec, smallvec};

use super::node::Saved;
use crate::backend::cpu::direct_conv::Conv2dShape;
use crate::backend::cpu::simd::Isa;
use crate::backend::cpu::unfold::Window2d;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{
    conv, direct_conv, dropout, elementwise, index, join, matmul, norm, reduce, softmax, unary,
    view,
};
use crate::shape::Dims;
use crate::tensor::DynTensor;

/// One op on the tape and what its gradient needs.
pub enum BackwardOp {
    Add {
        lhs_dims: Dims,
        rhs_dims: Dims,
    },
    Sub {
        lhs_dims: Dims,
        rhs_dims: Dims,
    },
    Mul {
        lhs: Saved,
        rhs: Saved,
    },
    Div {
        lhs: Saved,
        rhs: Saved,
    },
    Pow {
        base: Saved,
        exponent: Saved,
    },
    Where {
        condition: DynTensor,
        lhs_dims: Dims,
        rhs_dims: Dims,
    },
    Unary {
        op: unary::UnaryOp,
        input: Option<Saved>,
    },
    Sum {
        input_dims: Dims,
        axes: Vec<usize>,
        keepdim: bool,
    },
    Extremum {
        input: Saved,
        axes: Vec<usize>,
        keepdim: bool,
        max: bool,
    },
    Softmax {
        input: Saved,
        axis: usize,
        log: bool,
    },
    Matmul {
        lhs: Saved,
        rhs: Saved,
    },
    /// `input @ weight_t + bias`; inputs (input, weight_t, bias).
    Linear {
        input: Saved,
        weight_t: Saved,
        bias_dims: Dims,
    },
    Reshape {
        input_dims: Dims,
    },
    Permute {
        perm: Vec<usize>,
    },
    Expand {
        input_dims: Dims,
    },
    Narrow {
        input_dims: Dims,
        axis: usize,
        start: usize,
    },
    Contiguous,
    IndexSelect {
        input_dims: Dims,
        axis: usize,
        indices: DynTensor,
    },
    IndexAdd {
        axis: usize,
        indices: DynTensor,
    },
    Gather {
        input_dims: Dims,
        axis: usize,
        indices: DynTensor,
    },
    ScatterAdd {
        axis: usize,
        indices: DynTensor,
    },
    Cat {
        axis: usize,
        sizes: Vec<usize>,
    },
    Cast {
        from: DType,
    },
    /// A copy between devices; the gradient goes back to where the input was.
    ToDevice {
        from: crate::Device,
    },
    /// A convolution run by the CPU's direct kernels (`x`, `w` and an optional bias in).
    Conv2d {
        input: Saved,
        weight: Saved,
        shape: Conv2dShape,
        isa: Isa,
    },
    /// Dropout on the GPU with its draws hashed from `seed` (no mask kept).
    Dropout {
        p: f64,
        seed: u64,
    },
    /// Layer normalisation over the last axis (`x`, then the weight and bias when present).
    LayerNorm {
        input: Saved,
        weight: Option<Saved>,
        has_bias: bool,
        /// Each row's mean and `1 / sqrt(var + eps)`, `[rows, 2]`, for the fused backward.
        stats: DynTensor,
        eps: f64,
    },
    /// Sliding windows copied into columns (im2col); the adjoint of `Fold2d`.
    Unfold2d {
        window: Window2d,
    },
    /// Columns summed back into planes (col2im); the adjoint of `Unfold2d`.
    Fold2d {
        window: Window2d,
    },
    /// The sum of each sliding window (average pooling); the adjoint of `WindowSpread2d`.
    WindowSum2d {
        window: Window2d,
    },
    /// Each window's value added to all its inputs; the adjoint of `WindowSum2d`.
    WindowSpread2d {
        window: Window2d,
    },
}

impl BackwardOp {
    /// The op's name, as error messages show it.
    pub fn name(&self) -> &'static str {
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
            BackwardOp::Dropout { .. } => "dropout",
            BackwardOp::LayerNorm { .. } => "layer_norm",
            BackwardOp::Unfold2d { .. } => "unfold2d",
            BackwardOp::Fold2d { .. } => "fold2d",
            BackwardOp::WindowSum2d { .. } => "window_sum2d",
            BackwardOp::WindowSpread2d { .. } => "window_spread2d",
        }
    }

    /// Moves out the tensors this record saved (they may hold graph nodes), so a dropping
    /// graph can be freed iteratively.
    pub(crate) fn take_saved(&mut self) -> SmallVec<[DynTensor; 2]> {
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
            | BackwardOp::Extremum { input, .. }
            | BackwardOp::Softmax { input, .. } => smallvec![input.into_tensor()],
            BackwardOp::LayerNorm { input, weight, .. } => std::iter::once(input)
                .chain(weight)
                .map(Saved::into_tensor)
                .collect(),
            _ => SmallVec::new(),
        }
    }

    /// Gradients of the op's inputs given the gradient of its output. `needs[i]` says whether
    /// input `i` wants one; formulas skip the work for the others.
    pub(crate) fn backward(
        &self,
        grad: &DynTensor,
        needs: &[bool],
    ) -> Result<Vec<Option<DynTensor>>> {
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
            } => one(index::index_select_backward(
                grad, input_dims, *axis, indices,
            )),
            BackwardOp::IndexAdd { axis, indices } => {
                index::index_add_backward(grad, *axis, indices, needs)
            }
            BackwardOp::Gather {
                input_dims,
                axis,
                indices,
            } => one(index::gather_backward(grad, input_dims, *axis, indices)),
            BackwardOp::ScatterAdd { axis, indices } => {
                index::scatter_add_backward(grad, *axis, indices, needs)
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
        }
    }
}
