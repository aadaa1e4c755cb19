//! Launchers of `shaders/int8.wgsl`: int8 weights resident on the GPU, activations
//! quantized there, products by `dot4I8Packed`.

use super::batch::grid_1d;
use super::context::GpuDevice;
use super::memory::GpuBuffer;
use super::pipelines::Module;
use super::transfer::upload;
use crate::backend::cpu::CpuBuffer;
use crate::backend::kinds::Int8Matrix;
use crate::backend::{Int8, Src};
use crate::dtype::DType;
use crate::error::{DeviceError, Result};

/// A quantized layer's weights on one GPU: int8 rows four to a word, the per-row scales and
/// the bias (zeros when the layer has none).
#[derive(Debug)]
pub struct GpuInt8Weights {
    device: GpuDevice,
    rows: usize,
    cols: usize,
    words: GpuBuffer,
    scales: GpuBuffer,
    bias: GpuBuffer,
}

/// Int8 values four to a 32-bit word, value `4t + i` in byte `i` (as WGSL's `pack4xI8`).
fn pack_words(row: impl Iterator<Item = i8>, cols: usize) -> Vec<u32> {
    let mut words = vec![0u32; cols.div_ceil(4)];
    for (c, v) in row.enumerate() {
        words[c / 4] |= u32::from(v as u8) << (8 * (c % 4));
    }
    words
}

/// 32-bit words in an `f32` buffer, bit for bit: the upload path moves 32-bit words, and
/// the kernel reads these as `u32`.
fn as_word_buffer(words: Vec<u32>) -> CpuBuffer {
    CpuBuffer::F32(words.into_iter().map(f32::from_bits).collect())
}

impl Int8 for GpuDevice {
    type Int8Weights = GpuInt8Weights;

    /// Uploads the int8 weights four to a word, their scales and the bias.
    fn upload_int8(&self, matrix: &Int8Matrix<'_>) -> Result<GpuInt8Weights> {
        let Int8Matrix {
            rows,
            cols,
            value,
            scales,
            bias,
        } = *matrix;
        let words: Vec<u32> = (0..rows)
            .flat_map(|j| pack_words((0..cols).map(|t| value(j, t)), cols))
            .collect();
        let bias = bias.map_or_else(|| vec![0.0; rows], <[f32]>::to_vec);
        Ok(GpuInt8Weights {
            device: self.clone(),
            rows,
            cols,
            words: upload(self, &as_word_buffer(words))?,
            scales: upload(self, &CpuBuffer::F32(scales.to_vec()))?,
            bias: upload(self, &CpuBuffer::F32(bias))?,
        })
    }

    /// `x` `[m, cols]` (contiguous f32 on this device) -> `[m, rows]`.
    fn int8_linear(&self, x: Src<'_, GpuBuffer>, w: &GpuInt8Weights, m: usize) -> Result<GpuBuffer> {
        let op = "QuantizedLinear::forward";
        if w.device != *self {
            return Err(DeviceError::Mismatch {
                op,
                lhs: format!("{}", crate::Device::Gpu(self.clone())),
                rhs: format!("{}", crate::Device::Gpu(w.device.clone())),
            }
            .into());
        }
        let words = w.cols.div_ceil(4);
        // Each output element loops over the row's words.
        self.check_loop_budget(op, words + 1)?;
        let quantized = GpuBuffer::uninit(self, m * words, DType::F32, op)?;
        let row_scales = GpuBuffer::uninit(self, m, DType::F32, op)?;
        let out = GpuBuffer::uninit(self, m * w.rows, DType::F32, op)?;
        super::memory::check_words(x.dtype(), "GPU kernel")?;
        let input = x.memory;
        let as_u32 = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let mut params = [as_u32(m), as_u32(w.cols), as_u32(words), as_u32(w.rows), 0];
        let groups_x = m.clamp(1, 65_535);
        let quantize_groups = [groups_x as u32, m.div_ceil(groups_x).max(1) as u32, 1];
        self.dispatch(
            Module::Int8,
            "quantize_rows",
            &params,
            &[(1, input.raw()), (2, quantized.raw()), (3, row_scales.raw())],
            quantize_groups,
        );
        let (groups, row) = grid_1d(m * w.rows);
        params[4] = row;
        self.dispatch(
            Module::Int8,
            "int8_linear",
            &params,
            &[
                (2, quantized.raw()),
                (3, row_scales.raw()),
                (4, w.words.raw()),
                (5, w.scales.raw()),
                (6, w.bias.raw()),
                (7, out.raw()),
            ],
            groups,
        );
        Ok(out)
    }
}
