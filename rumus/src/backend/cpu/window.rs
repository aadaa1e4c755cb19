//! The CPU's side of the [`Windows`] contract: the window kernels of `unfold.rs` and the
//! direct convolution of `direct_conv.rs` (f32, stride 1, no dilation, one group, on a CPU
//! with AVX2 or AVX-512: half the time of columns and a product on the benchmark
//! convolution), which this backend chooses for the cases it covers.

use std::borrow::Cow;

use super::backend::{Cpu, ensure_output};
use super::buffer::CpuBuffer;
use super::depthwise_conv as depthwise;
use super::direct_conv::{self as direct, Conv2dShape};
use super::simd::Isa;
use super::unfold as kernel;
use crate::backend::contract::{Pointwise, Src, Windows};
use crate::backend::kinds::{DirectConv, Window2d, WindowKernel};
use crate::dtype::DType;
use crate::element::{Element, Float};
use crate::error::{Error, Result};

/// Contiguous row-major float elements.
enum FloatSlice<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
}

/// The memory of `x` made contiguous (copied only for a strided view), with the range of its
/// elements.
fn contiguous(x: Src<'_, CpuBuffer>) -> Result<(Cow<'_, CpuBuffer>, std::ops::Range<usize>)> {
    if x.layout.is_contiguous() {
        let start = x.layout.offset();
        return Ok((Cow::Borrowed(x.memory), start..start + x.numel()));
    }
    Ok((Cow::Owned(Cpu.copy(x)?), 0..x.numel()))
}

/// `f` of the row-major float elements of `x`; other dtypes are `op`'s error.
fn read_float<R>(
    x: Src<'_, CpuBuffer>,
    op: &'static str,
    f: impl FnOnce(FloatSlice<'_>) -> R,
) -> Result<R> {
    let (memory, range) = contiguous(x)?;
    match &*memory {
        CpuBuffer::F32(v) => Ok(f(FloatSlice::F32(&v[range]))),
        CpuBuffer::F64(v) => Ok(f(FloatSlice::F64(&v[range]))),
        other => Err(Error::DType {
            op,
            expected: "a floating-point tensor (f32 or f64)",
            found: other.dtype(),
        }),
    }
}

/// `f` of the row-major f32 elements of `x` (the direct convolution's only dtype).
fn read_f32<R>(x: Src<'_, CpuBuffer>, f: impl FnOnce(&[f32]) -> R) -> Result<R> {
    read_float(x, "conv2d", |data| match data {
        FloatSlice::F32(v) => Ok(f(v)),
        FloatSlice::F64(_) => Err(Error::DType {
            op: "conv2d",
            expected: "f32",
            found: DType::F64,
        }),
    })?
}

/// A contiguous buffer and the range of a tensor's elements in it.
type Elements<'a> = (&'a CpuBuffer, std::ops::Range<usize>);

/// [`depthwise::forward`] of `x` with `filters` and `bias` of `x`'s dtype; `None` for mixed
/// dtypes (the general path names the mismatch).
fn depthwise_of<T: Float + Default>(
    x: &[T],
    (filters, filter_range): Elements<'_>,
    bias: Option<Elements<'_>>,
    channels: usize,
    window: &Window2d,
) -> Option<CpuBuffer> {
    let filters = &T::slice(filters)?[filter_range];
    let bias = match bias {
        Some((memory, range)) => Some(&T::slice(memory)?[range]),
        None => None,
    };
    let out = depthwise::forward(x, filters, bias, channels, window);
    Some(T::into_buffer(out))
}

fn run<T: Float>(which: WindowKernel, data: &[T], planes: usize, w: &Window2d) -> Vec<T> {
    match which {
        WindowKernel::Unfold => kernel::unfold(data, planes, w),
        WindowKernel::Fold => kernel::fold(data, planes, w),
        WindowKernel::Sum => kernel::window_sum(data, planes, w),
        WindowKernel::Spread => kernel::window_spread(data, planes, w),
    }
}

/// The direct kernels' view of a convolution of `x` with `w` over `window`, if they cover it.
fn direct_plan(
    operands: &[Src<'_, CpuBuffer>],
    weight_dims: &[usize],
    window: &Window2d,
    groups: usize,
) -> Option<DirectConv> {
    let f32s = operands.iter().all(|t| t.dtype() == DType::F32);
    let plain = groups == 1 && window.stride == [1, 1] && window.dilation == [1, 1];
    if !f32s || !plain || window.kernel == [1, 1] {
        // 1x1 kernels are a plain product already.
        return None;
    }
    let x = operands[0].dims();
    if x[0] < super::parallel::threads() {
        // The direct kernels split the batch between threads, so fewer samples than threads
        // leave threads idle, where the product of the general path uses them all: ResNet-18
        // at batch 1 on 2 threads took 147 ms direct, 75 ms through the product (the same
        // 150 ms on one thread either way).
        return None;
    }
    let shape = Conv2dShape {
        batch: x[0],
        in_channels: x[1],
        input: window.input,
        out_channels: weight_dims[0],
        kernel: window.kernel,
        padding: window.padding,
    };
    let isa = Isa::detect()?;
    shape.supported().then_some(DirectConv { shape, isa })
}

impl Windows for Cpu {
    fn window(
        &self,
        x: Src<'_, CpuBuffer>,
        which: WindowKernel,
        planes: usize,
        window: &Window2d,
        out_dims: &[usize],
    ) -> Result<CpuBuffer> {
        // A padding of 2^20 turns a small image into terabytes of columns.
        ensure_output(which.name(), out_dims, x.dtype())?;
        read_float(x, which.name(), |data| match data {
            FloatSlice::F32(v) => f32::into_buffer(run(which, v, planes, window)),
            FloatSlice::F64(v) => f64::into_buffer(run(which, v, planes, window)),
        })
    }

    fn max_pool(
        &self,
        x: Src<'_, CpuBuffer>,
        planes: usize,
        window: &Window2d,
    ) -> Result<(Option<CpuBuffer>, CpuBuffer)> {
        let plane_len = window.input[0] * window.input[1];
        let positions = window.positions();
        // The values are taken in the same pass as their offsets.
        let (values, offsets) = read_float(x, "max_pool2d", |data| match data {
            FloatSlice::F32(v) => {
                let offsets = kernel::window_argmax(v, planes, window);
                let values = kernel::take_per_plane(v, plane_len, &offsets, positions);
                (f32::into_buffer(values), offsets)
            }
            FloatSlice::F64(v) => {
                let offsets = kernel::window_argmax(v, planes, window);
                let values = kernel::take_per_plane(v, plane_len, &offsets, positions);
                (f64::into_buffer(values), offsets)
            }
        })?;
        Ok((Some(values), CpuBuffer::I64(offsets)))
    }

    fn conv2d_direct(
        &self,
        x: Src<'_, CpuBuffer>,
        weight: Src<'_, CpuBuffer>,
        bias: Option<Src<'_, CpuBuffer>>,
        window: &Window2d,
        groups: usize,
    ) -> Result<Option<(CpuBuffer, DirectConv)>> {
        let operands: Vec<Src<'_, CpuBuffer>> = [x, weight].into_iter().chain(bias).collect();
        let Some(plan) = direct_plan(&operands, weight.dims(), window, groups) else {
            return Ok(None);
        };
        let shape = &plan.shape;
        let [oh, ow] = shape.output();
        let out_dims = [shape.batch, shape.out_channels, oh, ow];
        ensure_output("conv2d", &out_dims, DType::F32)?;
        let bias_values = bias.map(|b| read_f32(b, <[f32]>::to_vec)).transpose()?;
        let values = read_f32(x, |xs| {
            read_f32(weight, |ws| {
                direct::forward(plan.isa, shape, xs, ws, bias_values.as_deref())
            })
        })??;
        Ok(Some((f32::into_buffer(values), plan)))
    }

    fn depthwise_conv2d(
        &self,
        x: Src<'_, CpuBuffer>,
        weight: Src<'_, CpuBuffer>,
        bias: Option<Src<'_, CpuBuffer>>,
        window: &Window2d,
    ) -> Result<Option<CpuBuffer>> {
        let channels = weight.dims()[0];
        let [oh, ow] = window.output();
        ensure_output("conv2d", &[x.dims()[0], channels, oh, ow], x.dtype())?;
        let (weights, weight_range) = contiguous(weight)?;
        let bias = bias.map(contiguous).transpose()?;
        let bias = bias
            .as_ref()
            .map(|(memory, range)| (&**memory, range.clone()));
        let filters = (&*weights, weight_range);
        let out = read_float(x, "conv2d", |data| match data {
            FloatSlice::F32(xs) => depthwise_of(xs, filters, bias, channels, window),
            FloatSlice::F64(xs) => depthwise_of(xs, filters, bias, channels, window),
        })?;
        Ok(out)
    }

    fn conv2d_direct_input_grad(
        &self,
        dy: Src<'_, CpuBuffer>,
        weight: Src<'_, CpuBuffer>,
        plan: &DirectConv,
    ) -> Result<CpuBuffer> {
        let values = read_f32(dy, |dy| {
            read_f32(weight, |ws| {
                direct::input_grad(plan.isa, &plan.shape, dy, ws)
            })
        })??;
        Ok(f32::into_buffer(values))
    }

    fn conv2d_direct_weight_grad(
        &self,
        x: Src<'_, CpuBuffer>,
        dy: Src<'_, CpuBuffer>,
        plan: &DirectConv,
    ) -> Result<CpuBuffer> {
        let values = read_f32(x, |xs| {
            read_f32(dy, |dy| {
                direct::weight_grad_of(plan.isa, &plan.shape, xs, dy)
            })
        })??;
        Ok(f32::into_buffer(values))
    }

    fn conv2d_direct_bias_grad(
        &self,
        dy: Src<'_, CpuBuffer>,
        plan: &DirectConv,
    ) -> Result<CpuBuffer> {
        let values = read_f32(dy, |dy| direct::bias_grad_of(&plan.shape, dy))?;
        Ok(f32::into_buffer(values))
    }
}
