//! Deterministic fixed-point inference: integers only from the input to the logits, so a
//! model gives the same bits on every run, thread count and machine (no float rounding,
//! no fused multiply-adds, no summation order that depends on how work was split).
//!
//! - Activations are `i16` in Q7.8 ([`ACT_FRAC_BITS`] fractional bits: -128 to 127.996 in
//!   steps of 1/256).
//! - Weights are `i16` with fractional bits chosen per layer ([`FixedLinear::frac_bits`]) so
//!   the largest weight uses 12 bits of magnitude; biases are `i32` in the products' format.
//! - Each output sums its products in `i32`, in one fixed order, saturating at the `i32`
//!   bounds (so even an overflowing sum has one defined result), then shifts back to Q7.8
//!   rounding half up (`(acc + 2^(f-1)) >> f`, an arithmetic shift) and saturates to `i16`.
//!
//! ```
//! use rumus::nn::Linear;
//! use rumus::nn::fixed_point::{FixedLinear, FixedTensor};
//! # fn main() -> rumus::Result<()> {
//! let layer = Linear::<8, 3>::new()?;
//! let fixed = FixedLinear::from_linear(&layer)?;
//! let x = rumus::DynTensor::randn(&[2, 8], rumus::DType::F32)?;
//! let y = fixed.forward(&FixedTensor::from_f32(&x)?)?;
//! let gap = y.to_f32()?.sub(&layer.forward_dyn(&x)?)?.abs()?.max(&[0, 1], false)?;
//! assert!(gap.item::<f32>()? < 0.05);
//! # Ok(()) }
//! ```

use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::nn::{Conv2d, Linear};
use crate::tensor::DynTensor;

/// Fractional bits of every activation (Q7.8).
pub const ACT_FRAC_BITS: u32 = 8;

/// Magnitude bits of a layer's largest weight.
const WEIGHT_MAGNITUDE_BITS: i32 = 12;

/// A tensor of Q7.8 activations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedTensor {
    dims: Vec<usize>,
    values: Vec<i16>,
}

/// `v * 2^frac` rounded half away from zero (`f64::round`, exact in IEEE arithmetic on
/// every machine) and saturated to `i16`.
fn to_fixed(v: f64, frac: u32) -> i16 {
    (v * f64::from(1u32 << frac))
        .round()
        .clamp(-32768.0, 32767.0) as i16
}

/// Back from a product format with `shift` extra fractional bits to Q7.8: round half up,
/// saturate.
fn requantize(acc: i32, shift: u32) -> i16 {
    let rounded = if shift == 0 {
        i64::from(acc)
    } else {
        (i64::from(acc) + (1i64 << (shift - 1))) >> shift
    };
    rounded.clamp(-32768, 32767) as i16
}

/// One output's sum of products in a fixed order, saturating in `i32`.
fn dot(x: impl Iterator<Item = i16>, w: impl Iterator<Item = i16>, start: i32) -> i32 {
    x.zip(w).fold(start, |acc, (a, b)| {
        acc.saturating_add(i32::from(a) * i32::from(b))
    })
}

impl FixedTensor {
    /// An f32/f64 tensor in Q7.8 (values beyond the range saturate; NaN becomes 0).
    pub fn from_f32(x: &DynTensor) -> Result<FixedTensor> {
        let values = x
            .try_to_f64_vec()?
            .into_iter()
            .map(|v| to_fixed(if v.is_nan() { 0.0 } else { v }, ACT_FRAC_BITS))
            .collect();
        Ok(FixedTensor {
            dims: x.dims().to_vec(),
            values,
        })
    }

    /// From raw Q7.8 values.
    pub fn from_raw(values: Vec<i16>, dims: &[usize]) -> Result<FixedTensor> {
        if values.len() != dims.iter().product::<usize>() {
            return Err(Error::InvalidArgument {
                op: "FixedTensor::from_raw",
                message: format!("{} values for dims {dims:?}", values.len()),
            });
        }
        Ok(FixedTensor {
            dims: dims.to_vec(),
            values,
        })
    }

    /// The values as f32 (`q / 256`).
    pub fn to_f32(&self) -> Result<DynTensor> {
        let scale = 1.0 / f32::from(1u16 << ACT_FRAC_BITS);
        let values: Vec<f32> = self.values.iter().map(|&q| f32::from(q) * scale).collect();
        Ok(DynTensor::from_vec(values, &self.dims)?)
    }

    /// The raw Q7.8 values, row-major.
    pub fn raw(&self) -> &[i16] {
        &self.values
    }

    /// The shape.
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// `max(x, 0)` per element.
    pub fn relu(&self) -> FixedTensor {
        FixedTensor {
            dims: self.dims.clone(),
            values: self.values.iter().map(|&v| v.max(0)).collect(),
        }
    }

    /// The same values with the axes from 1 on merged: `[N, ...]` -> `[N, rest]`.
    pub fn flatten(&self) -> FixedTensor {
        let n = self.dims.first().copied().unwrap_or(1);
        FixedTensor {
            dims: vec![n, self.values.len().checked_div(n).unwrap_or(0)],
            values: self.values.clone(),
        }
    }

    /// Max over `k` x `k` windows moved by `k` of `[N, C, H, W]` (PyTorch's
    /// `F.max_pool2d(x, k)`: sizes rounded down).
    pub fn max_pool2d(&self, k: usize) -> Result<FixedTensor> {
        let &[n, c, h, w] = self.dims.as_slice() else {
            return Err(Error::InvalidArgument {
                op: "FixedTensor::max_pool2d",
                message: format!("an input of shape {:?}; expected [N, C, H, W]", self.dims),
            });
        };
        let k = k.max(1);
        let (oh, ow) = (h / k, w / k);
        let mut values = Vec::with_capacity(n * c * oh * ow);
        for plane in self.values.chunks((h * w).max(1)).take(n * c) {
            for oy in 0..oh {
                for ox in 0..ow {
                    let window =
                        (0..k).flat_map(|i| (0..k).map(move |j| (oy * k + i) * w + ox * k + j));
                    values.push(window.map(|at| plane[at]).max().unwrap_or(0));
                }
            }
        }
        Ok(FixedTensor {
            dims: vec![n, c, oh, ow],
            values,
        })
    }
}

/// Weights in i16 with `frac` fractional bits, and biases in i32 with `frac + 8`.
#[derive(Debug, Clone)]
struct FixedWeights {
    rows: usize,
    cols: usize,
    weights: Vec<i16>,
    biases: Vec<i32>,
    frac: u32,
}

impl FixedWeights {
    fn new(weight: &DynTensor, bias: Option<&DynTensor>) -> Result<FixedWeights> {
        let rows = weight.dims().first().copied().unwrap_or(0);
        let cols = weight.numel().checked_div(rows).unwrap_or(0);
        let values = weight.try_to_f64_vec()?;
        if values.iter().any(|v| !v.is_finite()) {
            return Err(Error::InvalidArgument {
                op: "fixed_point",
                message: "a weight is NaN or infinite".into(),
            });
        }
        let peak = values.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        // The largest weight gets WEIGHT_MAGNITUDE_BITS bits: frac = floor(log2(2^12 / peak)).
        let frac = if peak > 0.0 {
            (f64::from(1u32 << WEIGHT_MAGNITUDE_BITS) / peak)
                .log2()
                .floor()
                .clamp(0.0, 15.0) as u32
        } else {
            15
        };
        let weights = values.iter().map(|&v| to_fixed(v, frac)).collect();
        let biases = match bias {
            Some(b) => b
                .try_to_f64_vec()?
                .iter()
                .map(|&v| {
                    (v * f64::from(1u32 << (frac + ACT_FRAC_BITS)))
                        .round()
                        .clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
                })
                .collect(),
            None => vec![0; rows],
        };
        Ok(FixedWeights {
            rows,
            cols,
            weights,
            biases,
            frac,
        })
    }

    fn row(&self, j: usize) -> &[i16] {
        &self.weights[j * self.cols..(j + 1) * self.cols]
    }
}

/// A linear layer in fixed point.
#[derive(Debug, Clone)]
pub struct FixedLinear {
    weights: FixedWeights,
}

impl FixedLinear {
    /// Converts a trained layer.
    pub fn from_linear<const IN: usize, const OUT: usize>(
        layer: &Linear<IN, OUT>,
    ) -> Result<FixedLinear> {
        Ok(FixedLinear {
            weights: FixedWeights::new(&layer.weight, layer.bias.as_ref())?,
        })
    }

    /// Fractional bits of this layer's weights.
    pub fn frac_bits(&self) -> u32 {
        self.weights.frac
    }

    /// `[N, IN]` -> `[N, OUT]`, each output summed in order over the inputs.
    pub fn forward(&self, x: &FixedTensor) -> Result<FixedTensor> {
        let w = &self.weights;
        if x.dims.len() != 2 || x.dims[1] != w.cols {
            return Err(Error::InvalidArgument {
                op: "FixedLinear::forward",
                message: format!("an input of shape {:?}; expected [N, {}]", x.dims, w.cols),
            });
        }
        let n = x.dims[0];
        let mut values = vec![0i16; n * w.rows];
        values
            .par_chunks_mut(w.rows.max(1))
            .zip(x.values.par_chunks(w.cols.max(1)))
            .for_each(|(out, row)| {
                for (j, o) in out.iter_mut().enumerate() {
                    let acc = dot(row.iter().copied(), w.row(j).iter().copied(), w.biases[j]);
                    *o = requantize(acc, w.frac);
                }
            });
        Ok(FixedTensor {
            dims: vec![n, w.rows],
            values,
        })
    }
}

/// A 2-D convolution in fixed point (one group, zero padding), each output summed in the
/// order channel, kernel row, kernel column.
#[derive(Debug, Clone)]
pub struct FixedConv2d {
    weights: FixedWeights,
    kernel: usize,
    stride: usize,
    padding: usize,
}

impl FixedConv2d {
    /// Converts a trained layer (`groups` and `dilation` must be 1).
    pub fn from_conv2d<const IN: usize, const OUT: usize, const K: usize>(
        layer: &Conv2d<IN, OUT, K>,
    ) -> Result<FixedConv2d> {
        if layer.groups != 1 || layer.dilation != 1 {
            return Err(Error::InvalidArgument {
                op: "FixedConv2d::from_conv2d",
                message: "only convolutions of one group without dilation convert".into(),
            });
        }
        Ok(FixedConv2d {
            weights: FixedWeights::new(&layer.weight, layer.bias.as_ref())?,
            kernel: K,
            stride: layer.stride.max(1),
            padding: layer.padding,
        })
    }

    /// Fractional bits of this layer's weights.
    pub fn frac_bits(&self) -> u32 {
        self.weights.frac
    }

    /// `[N, C, H, W]` -> `[N, OUT, OH, OW]`.
    pub fn forward(&self, x: &FixedTensor) -> Result<FixedTensor> {
        let (w, k) = (&self.weights, self.kernel);
        let op = "FixedConv2d::forward";
        let &[n, c, h, wd] = x.dims.as_slice() else {
            return Err(Error::InvalidArgument {
                op,
                message: format!("an input of shape {:?}; expected [N, C, H, W]", x.dims),
            });
        };
        if c * k * k != w.cols {
            return Err(Error::InvalidArgument {
                op,
                message: format!(
                    "{c} input channels; this layer takes {}",
                    w.cols / (k * k).max(1)
                ),
            });
        }
        let size = |s: usize| {
            (s + 2 * self.padding)
                .checked_sub(k)
                .map(|d| d / self.stride + 1)
        };
        let (Some(oh), Some(ow)) = (size(h), size(wd)) else {
            return Err(Error::InvalidArgument {
                op,
                message: format!("a {h}x{wd} input is smaller than the {k}x{k} kernel"),
            });
        };
        let mut values = vec![0i16; n * w.rows * oh * ow];
        values
            .par_chunks_mut((oh * ow).max(1))
            .enumerate()
            .for_each(|(plane, out)| {
                let (sample, j) = (plane / w.rows, plane % w.rows);
                let input = &x.values[sample * c * h * wd..(sample + 1) * c * h * wd];
                let filter = w.row(j);
                for (at, o) in out.iter_mut().enumerate() {
                    let (oy, ox) = (at / ow, at % ow);
                    let taps = (0..c)
                        .flat_map(|ch| (0..k).flat_map(move |i| (0..k).map(move |jj| (ch, i, jj))));
                    let inputs = taps.map(|(ch, i, jj)| {
                        let iy = (oy * self.stride + i).checked_sub(self.padding);
                        let ix = (ox * self.stride + jj).checked_sub(self.padding);
                        match (iy, ix) {
                            (Some(iy), Some(ix)) if iy < h && ix < wd => {
                                input[(ch * h + iy) * wd + ix]
                            }
                            _ => 0,
                        }
                    });
                    let acc = dot(inputs, filter.iter().copied(), w.biases[j]);
                    *o = requantize(acc, w.frac);
                }
            });
        Ok(FixedTensor {
            dims: vec![n, w.rows, oh, ow],
            values,
        })
    }
}
