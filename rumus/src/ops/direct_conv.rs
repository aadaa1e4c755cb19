//! `conv2d` through a backend's direct kernels, where it has them (the CPU's, for f32, stride
//! 1, no dilation, one group, padding below the kernel size, on a CPU with AVX2 or AVX-512:
//! the backend decides), instead of im2col columns and a product, and one `Conv2d` record
//! whose gradients come from the same kernels.
//!
//! When the backward pass is itself recorded (`create_graph`), the gradients are built from
//! the differentiable ops of the general path instead (a transposed convolution and an
//! unfold-and-product), so gradients of any order stay available.

use super::BackwardOp;
use crate::autograd::{Saved, is_grad_enabled, record};
use crate::backend::cpu::direct_conv::Conv2dShape;
use crate::backend::cpu::simd::Isa;
use crate::backend::kinds::{DirectConv, Window2d};
use crate::error::Result;
use crate::storage::Storage;
use crate::tensor::DynTensor;

/// `conv2d` of validated operands through the backend's direct kernels, or `None` when it has
/// none for the case (or the operands are on different devices: the general path names the
/// mismatch).
pub(crate) fn conv2d(
    x: &DynTensor,
    w: &DynTensor,
    bias: Option<&DynTensor>,
    window: &Window2d,
    groups: usize,
) -> Result<Option<DynTensor>> {
    let device = x.device();
    if std::iter::once(w).chain(bias).any(|t| t.device() != device) {
        return Ok(None);
    }
    let planned = Storage::conv2d_direct(
        x.operand(),
        w.operand(),
        bias.map(DynTensor::operand),
        window,
        groups,
    )?;
    let Some((out, DirectConv { shape, isa })) = planned else {
        return Ok(None);
    };
    let [oh, ow] = shape.output();
    let out = DynTensor::computed(out, &[shape.batch, shape.out_channels, oh, ow]);
    let mut inputs = vec![x, w];
    inputs.extend(bias);
    Ok(Some(record(out, &inputs, || BackwardOp::Conv2d {
        input: Saved::new(x),
        weight: Saved::new(w),
        shape,
        isa,
    })))
}

/// Gradients of the input, the weight and (when `needs` has a third entry) the bias of a
/// direct convolution.
pub(crate) fn conv2d_backward(
    grad: &DynTensor,
    input: &Saved,
    weight: &Saved,
    shape: &Conv2dShape,
    isa: Isa,
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let (x, w) = (input.get("conv2d")?, weight.get("conv2d")?);
    let needs_bias = needs.get(2) == Some(&true);
    let (gx, gw, gb) = if is_grad_enabled() {
        let (gx, gw) = recorded_gradients(grad, x, w, shape, needs)?;
        let gb = needs_bias
            .then(|| grad.sum(&[0, 2, 3], false))
            .transpose()?;
        (gx, gw, gb)
    } else {
        // Made contiguous once for all three kernels (a loss's gradient is often a broadcast).
        let grad = grad.contiguous_untracked()?;
        let plan = DirectConv { shape: *shape, isa };
        let (gx, gw) = direct_gradients(&grad, x, w, &plan, needs)?;
        let gb = needs_bias
            .then(|| {
                let out = Storage::conv2d_direct_bias_grad(grad.operand(), &plan)?;
                Ok::<_, crate::error::Error>(DynTensor::computed(out, &[shape.out_channels]))
            })
            .transpose()?;
        (gx, gw, gb)
    };
    let mut grads = vec![gx, gw];
    if needs.len() > 2 {
        grads.push(gb);
    }
    Ok(grads)
}

type Pair = (Option<DynTensor>, Option<DynTensor>);

/// Input and weight gradients from the direct kernels (nothing recorded).
fn direct_gradients(
    grad: &DynTensor,
    x: &DynTensor,
    w: &DynTensor,
    plan: &DirectConv,
    needs: &[bool],
) -> Result<Pair> {
    let gx = if needs[0] {
        let out = Storage::conv2d_direct_input_grad(grad.operand(), w.operand(), plan)?;
        Some(DynTensor::computed(out, x.dims()))
    } else {
        None
    };
    let gw = if needs[1] {
        let out = Storage::conv2d_direct_weight_grad(x.operand(), grad.operand(), plan)?;
        Some(DynTensor::computed(out, w.dims()))
    } else {
        None
    };
    Ok((gx, gw))
}

/// Input and weight gradients from differentiable ops, for a recorded backward pass.
fn recorded_gradients(
    grad: &DynTensor,
    x: &DynTensor,
    w: &DynTensor,
    shape: &Conv2dShape,
    needs: &[bool],
) -> Result<Pair> {
    let kernel = (shape.kernel[0], shape.kernel[1]);
    let padding = (shape.padding[0], shape.padding[1]);
    let gx = if needs[0] {
        Some(grad.conv_transpose2d(w, None, (1, 1), padding, (0, 0), (1, 1))?)
    } else {
        None
    };
    let gw = if needs[1] {
        let (n, c, oc) = (shape.batch, shape.in_channels, shape.out_channels);
        let [oh, ow] = shape.output();
        let columns = x.unfold2d(kernel, (1, 1), padding, (1, 1))?.reshape(&[
            n,
            c * kernel.0 * kernel.1,
            oh * ow,
        ])?;
        let per_sample = grad
            .reshape(&[n, oc, oh * ow])?
            .matmul(&columns.transpose(1, 2)?)?;
        Some(per_sample.sum(&[0], false)?.reshape(w.dims())?)
    } else {
        None
    };
    Ok((gx, gw))
}
