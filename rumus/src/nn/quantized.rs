//! Int8 inference for trained `Linear` and `Conv2d` layers: weights quantized once per
//! output channel (symmetric, `scale = max|w| / 127`), activations quantized per row as they
//! arrive (per sample of a linear layer, per output position of a convolution), products in
//! exact int8 x int8 -> i32 sums (`backend::cpu::int8`), then one multiply by the two scales
//! and the f32 bias. Weights take a quarter of their f32 memory, plus one f32 per channel.
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

use crate::backend::cpu::int8::matmul_i8_nt;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::nn::{Conv2d, Linear};
use crate::tensor::DynTensor;

/// A weight matrix in int8, one scale per row (output channel).
#[derive(Debug, Clone)]
pub struct Int8Weights {
    rows: usize,
    cols: usize,
    values: Vec<i8>,
    scales: Vec<f32>,
}

/// Symmetric int8 quantization of each `cols`-long row: `q = round(v / s)` with
/// `s = max|v| / 127` (1 for an all-zero row); a row holding a NaN or an infinity gets a NaN
/// scale, so everything computed from it is NaN.
fn quantize_rows(values: &[f32], cols: usize) -> (Vec<i8>, Vec<f32>) {
    let rows = values.len() / cols.max(1);
    let mut quantized = vec![0i8; values.len()];
    let mut scales = Vec::with_capacity(rows);
    for (row, out) in values.chunks(cols).zip(quantized.chunks_mut(cols)) {
        let mut peak = 0.0f32;
        let mut finite = true;
        for &v in row {
            finite &= v.is_finite();
            peak = peak.max(v.abs());
        }
        let scale = match (finite, peak > 0.0) {
            (false, _) => f32::NAN,
            (true, false) => 1.0,
            (true, true) => peak / 127.0,
        };
        if finite {
            for (q, &v) in out.iter_mut().zip(row) {
                *q = (v / scale).round().clamp(-127.0, 127.0) as i8;
            }
        }
        scales.push(scale);
    }
    (quantized, scales)
}

fn float32(x: &DynTensor, op: &'static str) -> Result<Vec<f32>> {
    if x.dtype() != DType::F32 {
        return Err(Error::DType {
            op,
            expected: "an f32 tensor (quantized layers take f32 activations)",
            found: x.dtype(),
        });
    }
    if x.device().is_gpu() {
        return Err(Error::InvalidArgument {
            op,
            message: "quantized layers run on the CPU; move the input with `.to(&Device::Cpu)`"
                .into(),
        });
    }
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
            values,
            scales,
        })
    }

    /// The f32 matrix `[rows, cols]` the int8 values stand for (`q * scale`).
    pub fn dequantize(&self) -> Result<DynTensor> {
        let values = self
            .values
            .chunks(self.cols.max(1))
            .zip(&self.scales)
            .flat_map(|(row, &s)| row.iter().map(move |&q| f32::from(q) * s))
            .collect();
        Ok(DynTensor::from_vec(values, &[self.rows, self.cols])?)
    }

    /// Bytes held: one per weight and four per row's scale.
    pub fn bytes(&self) -> usize {
        self.values.len() + 4 * self.scales.len()
    }

    /// `x` `[m, cols]` (row-major f32) times this matrix transposed, plus `bias`: `[m, rows]`.
    fn linear(&self, x: &[f32], m: usize, bias: Option<&[f32]>) -> Vec<f32> {
        let (xq, x_scales) = quantize_rows(x, self.cols);
        let sums = matmul_i8_nt(&xq, &self.values, m, self.rows, self.cols);
        let mut out = Vec::with_capacity(sums.len());
        for (row, &xs) in sums.chunks(self.rows.max(1)).zip(&x_scales) {
            for (j, &s) in row.iter().enumerate() {
                let b = bias.map_or(0.0, |b| b[j]);
                out.push(s as f32 * (xs * self.scales[j]) + b);
            }
        }
        out
    }
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

/// A linear layer with int8 weights: `y = x W^T + b` computed in int8 with f32 scales.
#[derive(Debug, Clone)]
pub struct QuantizedLinear {
    weight: Int8Weights,
    bias: Option<Vec<f32>>,
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
        Ok(QuantizedLinear { weight, bias })
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
        let values = float32(x, op)?;
        let m = values.len() / k.max(1);
        let out = self.weight.linear(&values, m, self.bias.as_deref());
        let mut dims = x.dims().to_vec();
        *dims.last_mut().expect("rank >= 1") = self.weight.rows;
        Ok(DynTensor::from_vec(out, &dims)?)
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
        float32(x, op)?;
        let pair = |v: usize| (v, v);
        let columns = x.unfold2d(
            pair(self.kernel),
            pair(self.stride),
            pair(self.padding),
            pair(self.dilation),
        )?;
        let (n, positions) = (x.dims()[0], columns.dims()[3]);
        // Each output position's window as one row: [N, L, C * K * K].
        let windows = columns
            .reshape(&[n, self.weight.cols, positions])?
            .permute(&[0, 2, 1])?
            .contiguous()?
            .to_vec::<f32>()?;
        let out = self
            .weight
            .linear(&windows, n * positions, self.bias.as_deref());
        let (h, w) = (x.dims()[2], x.dims()[3]);
        let size = |s: usize| {
            (s + 2 * self.padding - self.dilation * (self.kernel - 1) - 1) / self.stride + 1
        };
        DynTensor::from_vec(out, &[n, positions, self.weight.rows])?
            .permute(&[0, 2, 1])?
            .contiguous()?
            .reshape(&[n, self.weight.rows, size(h), size(w)])
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
