//! Int8 inference for trained `Linear` and `Conv2d` layers: weights quantized once per
//! output channel (symmetric, `scale = max|w| / 127`), activations quantized symmetrically as
//! they arrive (per row of a linear layer's input, per sample of a convolution's), products
//! in exact int8 x int8 -> i32 sums (`backend::cpu::int8`), then one multiply by the two
//! scales and the f32 bias. Weights take a quarter of their f32 memory, plus one f32 per
//! channel.
//!
//! ```
//! use rumus::nn::{Linear, quantized::QuantizedLinear};
//! # fn main() -> rumus::Result<()> {
//! let layer = Linear::<64, 10>::new()?;
//! let int8 = QuantizedLinear::from_linear(&layer)?;
//! let x = rumus::DynTensor::randn(&[4, 64], rumus::DType::F32)?;
//! let (exact, approx) = (layer.forward_dyn(&x)?, int8.forward(&x)?);
//! let gap = exact.sub(&approx)?.abs()?.max(&[0, 1], false)?.item::<f32>()?;
//! assert!(gap < 0.05, "{gap}");
//! # Ok(()) }
//! ```
//!
//! Inference only: the outputs carry no gradient. A row (or channel) with a NaN or an
//! infinity gives NaN outputs rather than a silently wrong value.

use rayon::prelude::*;

use crate::backend::cpu::int8::PackedI8;
use crate::backend::kinds::Int8Matrix;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::nn::{Conv2d, Linear};
use crate::storage::{Int8Resident, Storage};
use crate::tensor::DynTensor;

/// A weight matrix in int8, one scale per row (output channel), stored in the product
/// kernel's blocked layout.
#[derive(Debug, Clone)]
pub struct Int8Weights {
    rows: usize,
    cols: usize,
    packed: PackedI8,
    scales: Vec<f32>,
}

/// The symmetric int8 scale of values whose largest magnitude is `peak`: `peak / 127`, 1
/// when all are zero, NaN when one is NaN or infinite (so everything computed from it is
/// NaN).
fn scale_of(peak: f32, finite: bool) -> f32 {
    match (finite, peak > 0.0) {
        (false, _) => f32::NAN,
        (true, false) => 1.0,
        (true, true) => peak / 127.0,
    }
}

/// `v * inverse` rounded half away from zero (as `f32::round`) and clamped to +-127.
/// Written with a truncating conversion: on the default x86-64 target `f32::round` is a
/// library call per element, which made quantizing an activation cost three times the
/// int8 product that follows it.
#[inline]
fn quantize(v: f32, inverse: f32) -> i8 {
    let r = (v * inverse).clamp(-127.0, 127.0);
    (r + 0.5f32.copysign(r)) as i8
}

/// Symmetric int8 quantization of each `cols`-long row (`q = round(v / s)`, `s` from
/// [`scale_of`]).
fn quantize_rows(values: &[f32], cols: usize) -> (Vec<i8>, Vec<f32>) {
    let rows = values.len().checked_div(cols).unwrap_or(0);
    let mut quantized = vec![0i8; rows * cols];
    let mut scales = Vec::with_capacity(rows);
    for (row, out) in values
        .chunks(cols.max(1))
        .zip(quantized.chunks_mut(cols.max(1)))
    {
        let finite = row.iter().all(|v| v.is_finite());
        let scale = scale_of(row.iter().fold(0.0f32, |m, v| m.max(v.abs())), finite);
        if finite {
            let inverse = 1.0 / scale;
            for (q, &v) in out.iter_mut().zip(row) {
                *q = quantize(v, inverse);
            }
        }
        scales.push(scale);
    }
    (quantized, scales)
}

fn check_f32(x: &DynTensor, op: &'static str) -> Result<()> {
    if x.dtype() != DType::F32 {
        return Err(Error::DType {
            op,
            expected: "an f32 tensor (quantized layers take f32 activations)",
            found: x.dtype(),
        });
    }
    Ok(())
}

/// The host values of a CPU input.
fn float32(x: &DynTensor, op: &'static str) -> Result<Vec<f32>> {
    check_f32(x, op)?;
    x.to_vec::<f32>()
}

impl Int8Weights {
    /// Quantizes `weight` `[rows, ...]` (the trailing axes flattened into columns).
    pub fn quantize(weight: &DynTensor) -> Result<Int8Weights> {
        let op = "Int8Weights::quantize";
        let rows = *weight
            .dims()
            .first()
            .ok_or_else(|| Error::InvalidArgument {
                op,
                message: "a weight needs at least one axis".into(),
            })?;
        let cols = weight.numel().checked_div(rows).unwrap_or(0);
        let values = weight.to_dtype(DType::F32)?.to_vec::<f32>()?;
        let (values, scales) = quantize_rows(&values, cols);
        Ok(Int8Weights {
            rows,
            cols,
            packed: PackedI8::new(&values, rows, cols),
            scales,
        })
    }

    /// The f32 matrix `[rows, cols]` the int8 values stand for (`q * scale`).
    pub fn dequantize(&self) -> Result<DynTensor> {
        let values = (0..self.rows)
            .flat_map(|j| {
                (0..self.cols).map(move |t| f32::from(self.packed.get(j, t)) * self.scales[j])
            })
            .collect();
        Ok(DynTensor::from_vec(values, &[self.rows, self.cols])?)
    }

    /// Bytes held: one per stored weight (rows padded to blocks of eight) and four per
    /// row's scale.
    pub fn bytes(&self) -> usize {
        self.packed.bytes() + 4 * self.scales.len()
    }

    /// Exact sums of the quantized rows `xq` (`m` rows of `cols`) with every weight row:
    /// `[m, rows]`; on this thread only unless `split`.
    fn sums(&self, xq: &[i8], m: usize, split: bool) -> Vec<i32> {
        self.packed.product(xq, m, split)
    }

    /// `x` `[m, cols]` (row-major f32) times this matrix transposed, plus `bias`: `[m, rows]`.
    fn linear(&self, x: &[f32], m: usize, bias: Option<&[f32]>) -> Vec<f32> {
        let (xq, x_scales) = quantize_rows(x, self.cols);
        let sums = self.sums(&xq, m, true);
        let mut out = Vec::with_capacity(sums.len());
        for (row, &xs) in sums.chunks(self.rows.max(1)).zip(&x_scales) {
            for (j, &s) in row.iter().enumerate() {
                let b = bias.map_or(0.0, |b| b[j]);
                out.push(s as f32 * (xs * self.scales[j]) + b);
            }
        }
        out
    }

    /// One sample's convolution: the sample `[C, H, W]` quantized with one scale, its windows
    /// gathered straight into int8 rows (im2col in int8, a quarter of the f32 columns'
    /// memory traffic), the sums, then `out` `[rows, positions]`.
    fn convolve(&self, x: &[f32], g: &Geometry, bias: Option<&[f32]>, out: &mut [f32]) {
        let finite = x.iter().all(|v| v.is_finite());
        let scale = scale_of(x.iter().fold(0.0f32, |m, v| m.max(v.abs())), finite);
        let inverse = if finite { 1.0 / scale } else { 0.0 };
        let xq: Vec<i8> = x.iter().map(|&v| quantize(v, inverse)).collect();
        let stride = self.cols;
        let positions = g.oh * g.ow;
        let mut windows = vec![0i8; positions * stride];
        for (l, row) in windows.chunks_mut(stride).enumerate() {
            let (oy, ox) = (l / g.ow, l % g.ow);
            let mut t = 0;
            for c in 0..g.channels {
                let plane = &xq[c * g.h * g.w..(c + 1) * g.h * g.w];
                for ki in 0..g.kernel {
                    let iy = (oy * g.stride + ki * g.dilation).checked_sub(g.padding);
                    let run = &mut row[t..t + g.kernel];
                    t += g.kernel;
                    let Some(iy) = iy.filter(|&iy| iy < g.h) else {
                        continue; // a padding row: zeros
                    };
                    let line = &plane[iy * g.w..(iy + 1) * g.w];
                    let first = (ox * g.stride).checked_sub(g.padding);
                    match first {
                        // Dense taps inside the row: one copy.
                        Some(ix) if g.dilation == 1 && ix + g.kernel <= g.w => {
                            run.copy_from_slice(&line[ix..ix + g.kernel]);
                        }
                        _ => {
                            for (kj, v) in run.iter_mut().enumerate() {
                                let ix = (ox * g.stride + kj * g.dilation).checked_sub(g.padding);
                                if let Some(ix) = ix.filter(|&ix| ix < g.w) {
                                    *v = line[ix];
                                }
                            }
                        }
                    }
                }
            }
        }
        // Samples are already spread across threads.
        let sums = self.sums(&windows, positions, false);
        for (j, out_row) in out.chunks_mut(positions).enumerate() {
            let (factor, b) = (scale * self.scales[j], bias.map_or(0.0, |b| b[j]));
            for (l, o) in out_row.iter_mut().enumerate() {
                *o = sums[l * self.rows + j] as f32 * factor + b;
            }
        }
    }
}

/// Sizes of one convolution.
struct Geometry {
    channels: usize,
    h: usize,
    w: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    oh: usize,
    ow: usize,
}

fn bias_values(
    bias: Option<&DynTensor>,
    rows: usize,
    op: &'static str,
) -> Result<Option<Vec<f32>>> {
    let Some(bias) = bias else { return Ok(None) };
    if bias.numel() != rows {
        return Err(Error::InvalidArgument {
            op,
            message: format!("a bias of shape {:?} for {rows} outputs", bias.dims()),
        });
    }
    Ok(Some(bias.to_dtype(DType::F32)?.to_vec::<f32>()?))
}

/// `weight` and `bias` uploaded to `device` (nothing for the CPU).
fn upload(
    weight: &Int8Weights,
    bias: Option<&[f32]>,
    device: &crate::Device,
) -> Result<Int8Resident> {
    let matrix = Int8Matrix {
        rows: weight.rows,
        cols: weight.cols,
        value: &|j, t| weight.packed.get(j, t),
        scales: &weight.scales,
        bias,
    };
    Storage::upload_int8(device, &matrix)
}

/// `rows` `[m, cols]` (f32 on a GPU) through the uploaded weights: `[m, out]`, each row
/// quantized with its own scale.
fn gpu_rows(
    resident: &Int8Resident,
    rows: &DynTensor,
    out: usize,
    op: &'static str,
) -> Result<DynTensor> {
    check_f32(rows, op)?;
    let m = rows.dims()[0];
    if matches!(resident, Int8Resident::Gpu(_)) {
        let rows = rows.contiguous()?;
        if let Some(product) = Storage::int8_linear(rows.operand(), resident, m)? {
            return Ok(DynTensor::computed(product, &[m, out]));
        }
    }
    Err(Error::InvalidArgument {
        op,
        message: "a GPU input, and the layer's weights are on the CPU; move them with \
                  `layer.to(&device)?` first"
            .into(),
    })
}

/// A linear layer with int8 weights: `y = x W^T + b` computed in int8 with f32 scales, on
/// the CPU, or on a GPU after [`to`](Self::to) (`shaders/int8.wgsl`, `dot4I8Packed`).
#[derive(Debug, Clone)]
pub struct QuantizedLinear {
    weight: Int8Weights,
    bias: Option<Vec<f32>>,
    /// The weights on a GPU, after `to`.
    gpu: Int8Resident,
}

impl QuantizedLinear {
    /// Quantizes a trained layer's weights.
    pub fn from_linear<const IN: usize, const OUT: usize>(
        layer: &Linear<IN, OUT>,
    ) -> Result<QuantizedLinear> {
        QuantizedLinear::new(&layer.weight, layer.bias.as_ref())
    }

    /// From a weight `[out, in]` and an optional bias `[out]`.
    pub fn new(weight: &DynTensor, bias: Option<&DynTensor>) -> Result<QuantizedLinear> {
        let op = "QuantizedLinear::new";
        if weight.rank() != 2 {
            return Err(Error::InvalidArgument {
                op,
                message: format!("a weight of shape {:?}; expected [out, in]", weight.dims()),
            });
        }
        let weight = Int8Weights::quantize(weight)?;
        let bias = bias_values(bias, weight.rows, op)?;
        Ok(QuantizedLinear {
            weight,
            bias,
            gpu: Default::default(),
        })
    }

    /// The layer with its weights also on `device`, where inputs on that device then run
    /// (CPU inputs keep the CPU kernel).
    pub fn to(&self, device: &crate::Device) -> Result<QuantizedLinear> {
        Ok(QuantizedLinear {
            gpu: upload(&self.weight, self.bias.as_deref(), device)?,
            ..self.clone()
        })
    }

    /// `x` `[..., in]` f32 -> `[..., out]` f32.
    pub fn forward(&self, x: &DynTensor) -> Result<DynTensor> {
        let op = "QuantizedLinear::forward";
        let k = self.weight.cols;
        if x.dims().last() != Some(&k) {
            return Err(Error::InvalidArgument {
                op,
                message: format!(
                    "an input of shape {:?}; its last axis must be {k}",
                    x.dims()
                ),
            });
        }
        let m = x.numel() / k.max(1);
        if x.device().is_gpu() {
            return self.forward_gpu(x, m);
        }
        let values = float32(x, op)?;
        let out = self.weight.linear(&values, m, self.bias.as_deref());
        let mut dims = x.dims().to_vec();
        *dims.last_mut().expect("rank >= 1") = self.weight.rows;
        Ok(DynTensor::from_vec(out, &dims)?)
    }

    fn forward_gpu(&self, x: &DynTensor, m: usize) -> Result<DynTensor> {
        let rows = x.reshape(&[m, self.weight.cols])?;
        let out = gpu_rows(
            &self.gpu,
            &rows,
            self.weight.rows,
            "QuantizedLinear::forward",
        )?;
        let mut dims = x.dims().to_vec();
        *dims.last_mut().expect("rank >= 1") = self.weight.rows;
        out.reshape(&dims)
    }

    /// The quantized weights.
    pub fn weight(&self) -> &Int8Weights {
        &self.weight
    }

    /// Bytes of weights, scales and bias (an f32 layer holds `4 * (in + 1) * out`).
    pub fn bytes(&self) -> usize {
        self.weight.bytes() + 4 * self.bias.as_ref().map_or(0, Vec::len)
    }
}

/// A 2-D convolution with int8 weights (one group), computed as int8 products of each
/// output position's input window with every filter.
#[derive(Debug, Clone)]
pub struct QuantizedConv2d {
    weight: Int8Weights,
    bias: Option<Vec<f32>>,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
    /// The filters on a GPU, after `to`.
    gpu: Int8Resident,
}

impl QuantizedConv2d {
    /// Quantizes a trained layer's filters (`groups` must be 1).
    pub fn from_conv2d<const IN: usize, const OUT: usize, const K: usize>(
        layer: &Conv2d<IN, OUT, K>,
    ) -> Result<QuantizedConv2d> {
        let op = "QuantizedConv2d::from_conv2d";
        if layer.groups != 1 {
            return Err(Error::InvalidArgument {
                op,
                message: format!(
                    "a convolution of {} groups; only 1 is quantized",
                    layer.groups
                ),
            });
        }
        let weight = Int8Weights::quantize(&layer.weight)?;
        let bias = bias_values(layer.bias.as_ref(), OUT, op)?;
        Ok(QuantizedConv2d {
            weight,
            bias,
            kernel: K,
            stride: layer.stride,
            padding: layer.padding,
            dilation: layer.dilation,
            gpu: Default::default(),
        })
    }

    /// The layer with its filters also on `device`, where inputs on that device then run:
    /// there each window is quantized with its own scale (the CPU quantizes each sample
    /// once), through `unfold2d` and the GPU int8 product.
    pub fn to(&self, device: &crate::Device) -> Result<QuantizedConv2d> {
        Ok(QuantizedConv2d {
            gpu: upload(&self.weight, self.bias.as_deref(), device)?,
            ..self.clone()
        })
    }

    /// `x` `[N, C, H, W]` f32 -> `[N, OUT, OH, OW]` f32, sizes as `Conv2d::forward_dyn`.
    pub fn forward(&self, x: &DynTensor) -> Result<DynTensor> {
        let op = "QuantizedConv2d::forward";
        let k2 = self.kernel * self.kernel;
        if x.rank() != 4 || x.dims()[1] * k2 != self.weight.cols {
            return Err(Error::InvalidArgument {
                op,
                message: format!(
                    "an input of shape {:?}; expected [N, {}, H, W]",
                    x.dims(),
                    self.weight.cols / k2.max(1)
                ),
            });
        }
        let (n, channels, h, w) = (x.dims()[0], x.dims()[1], x.dims()[2], x.dims()[3]);
        let span = self.dilation * (self.kernel - 1) + 1;
        let size = |s: usize| {
            (s + 2 * self.padding)
                .checked_sub(span)
                .map(|d| d / self.stride + 1)
        };
        let (Some(oh), Some(ow)) = (size(h), size(w)) else {
            return Err(Error::InvalidArgument {
                op,
                message: format!(
                    "an input of {h}x{w} is smaller than the {span}x{span} window (padding {})",
                    self.padding
                ),
            });
        };
        let g = Geometry {
            channels,
            h,
            w,
            kernel: self.kernel,
            stride: self.stride.max(1),
            padding: self.padding,
            dilation: self.dilation,
            oh,
            ow,
        };
        crate::alloc::ensure_output(op, &[n, self.weight.rows, oh, ow], 4)?;
        if x.device().is_gpu() {
            let pair = |v: usize| (v, v);
            let windows = x
                .unfold2d(
                    pair(self.kernel),
                    pair(self.stride),
                    pair(self.padding),
                    pair(self.dilation),
                )?
                .reshape(&[n, self.weight.cols, oh * ow])?
                .permute(&[0, 2, 1])?
                .reshape(&[n * oh * ow, self.weight.cols])?;
            return gpu_rows(&self.gpu, &windows, self.weight.rows, op)?
                .reshape(&[n, oh * ow, self.weight.rows])?
                .permute(&[0, 2, 1])?
                .reshape(&[n, self.weight.rows, oh, ow]);
        }
        // Pooled memory: a fresh multi-megabyte output would pay a page fault per 4 KiB.
        let mut out = crate::backend::cpu::pool::reused(n * self.weight.rows * oh * ow, 0.0f32);
        let input = float32(x, op)?;
        out.par_chunks_mut((self.weight.rows * oh * ow).max(1))
            .zip(input.par_chunks((channels * h * w).max(1)))
            .for_each(|(out, sample)| self.weight.convolve(sample, &g, self.bias.as_deref(), out));
        Ok(DynTensor::from_vec(out, &[n, self.weight.rows, oh, ow])?)
    }

    /// The quantized filters, `[OUT, IN * K * K]`.
    pub fn weight(&self) -> &Int8Weights {
        &self.weight
    }

    /// Bytes of filters, scales and bias.
    pub fn bytes(&self) -> usize {
        self.weight.bytes() + 4 * self.bias.as_ref().map_or(0, Vec::len)
    }
}
