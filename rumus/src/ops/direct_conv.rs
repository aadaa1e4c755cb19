//! The CPU fast path of `conv2d` for its most common form: f32, stride 1, no dilation, one
//! group, padding below the kernel size, on a CPU with AVX2 or AVX-512. It runs the direct
//! kernels of [`backend::cpu::direct_conv`](crate::backend::cpu::direct_conv) instead of
//! im2col columns and a product (half the time of that path on the benchmark convolution)
//! and records one `Conv2d` record whose gradients come from the same kernels.
//!
//! When the backward pass is itself recorded (`create_graph`), the gradients are built from
//! the differentiable ops of the general path instead (a transposed convolution and an
//! unfold-and-product), so gradients of any order stay available.

use super::BackwardOp;
use crate::autograd::{Saved, is_grad_enabled, record};
use crate::backend::cpu::direct_conv::{self as kernel, Conv2dShape};
use crate::backend::cpu::simd::Isa;
use crate::backend::cpu::unfold::Window2d;
use crate::dtype::DType;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::ops::conv::{FloatSlice, read_float};
use crate::storage::CpuBuffer;
use crate::tensor::DynTensor;

/// The contiguous f32 elements of `t` (read as the general path reads them), handed to `f`.
fn with_f32<R>(t: &DynTensor, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
    read_float(t, "conv2d", |data| match data {
        FloatSlice::F32(v) => Ok(f(v)),
        FloatSlice::F64(_) => Err(Error::DType {
            op: "conv2d",
            expected: "f32",
            found: DType::F64,
        }),
    })?
}

/// `f` of the contiguous f32 elements of `a` and `b`, read together. Both locks are taken by
/// [`read_pair`](crate::ops::elementwise::read_pair), in the global lock order: reading one
/// inside the other in argument order could deadlock against threads reading them the
/// other way round.
fn with_f32_pair<R>(
    a: &DynTensor,
    b: &DynTensor,
    f: impl FnOnce(&[f32], &[f32]) -> R,
) -> Result<R> {
    let (a, b) = (a.contiguous_untracked()?, b.contiguous_untracked()?);
    let range = |t: &DynTensor| t.layout().offset()..t.layout().offset() + t.numel();
    let (ra, rb) = (range(&a), range(&b));
    crate::ops::elementwise::read_pair(&a, &b, |ba, bb| match (ba, bb) {
        (CpuBuffer::F32(va), CpuBuffer::F32(vb)) => Ok(f(&va[ra], &vb[rb])),
        (CpuBuffer::F32(_), other) | (other, _) => Err(Error::DType {
            op: "conv2d",
            expected: "f32",
            found: other.dtype(),
        }),
    })?
}

/// The direct kernels' view of `x * w` with window `window`, if they cover it.
fn direct_shape(
    x: &DynTensor,
    w: &DynTensor,
    bias: Option<&DynTensor>,
    window: &Window2d,
    groups: usize,
) -> Option<(Isa, Conv2dShape)> {
    let on_host = std::iter::once(x)
        .chain([w])
        .chain(bias)
        .all(|t| t.dtype() == DType::F32 && !t.device().is_gpu());
    let plain = groups == 1 && window.stride == [1, 1] && window.dilation == [1, 1];
    if !on_host || !plain || window.kernel == [1, 1] {
        // 1x1 kernels are a plain product already.
        return None;
    }
    let shape = Conv2dShape {
        batch: x.dims()[0],
        in_channels: x.dims()[1],
        input: window.input,
        out_channels: w.dims()[0],
        kernel: window.kernel,
        padding: window.padding,
    };
    Some((Isa::detect()?, shape)).filter(|(_, shape)| shape.supported())
}

/// `conv2d` of validated operands through the direct kernels, or `None` when they do not
/// cover the case.
pub(crate) fn conv2d(
    x: &DynTensor,
    w: &DynTensor,
    bias: Option<&DynTensor>,
    window: &Window2d,
    groups: usize,
) -> Result<Option<DynTensor>> {
    let Some((isa, shape)) = direct_shape(x, w, bias, window, groups) else {
        return Ok(None);
    };
    let [oh, ow] = shape.output();
    let out_dims = [shape.batch, shape.out_channels, oh, ow];
    crate::alloc::ensure_output("conv2d", &out_dims, 4)?;
    let bias_values = bias.map(|b| b.to_vec::<f32>()).transpose()?;
    let values = with_f32_pair(x, w, |xs, ws| {
        kernel::forward(isa, &shape, xs, ws, bias_values.as_deref())
    })?;
    let out = DynTensor::from_buffer(f32::into_buffer(values), &out_dims);
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
        let (gx, gw) = direct_gradients(&grad, x, w, (isa, shape), needs)?;
        let gb = needs_bias
            .then(|| {
                let values = with_f32(&grad, |dy| kernel::bias_grad_of(shape, dy))?;
                Ok::<_, Error>(DynTensor::from_buffer(
                    f32::into_buffer(values),
                    &[shape.out_channels],
                ))
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
    (isa, shape): (Isa, &Conv2dShape),
    needs: &[bool],
) -> Result<Pair> {
    let gx = if needs[0] {
        let values = with_f32_pair(grad, w, |dy, ws| kernel::input_grad(isa, shape, dy, ws))?;
        Some(DynTensor::from_buffer(f32::into_buffer(values), x.dims()))
    } else {
        None
    };
    let gw = if needs[1] {
        let values = with_f32_pair(x, grad, |xs, dy| kernel::weight_grad_of(isa, shape, xs, dy))?;
        Some(DynTensor::from_buffer(f32::into_buffer(values), w.dims()))
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
