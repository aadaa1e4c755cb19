//! A Llama weight matrix as the model holds it: f32, or in the file's 4- and 8-bit blocks.

use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::nn::block_quantized::BlockQuantized;
use crate::tensor::DynTensor;

/// A `[out, in]` weight matrix.
#[derive(Clone)]
pub(super) enum Matrix {
    /// f32 values (read from f32/f16/bf16 tensors, or dequantized).
    Dense(DynTensor),
    /// The file's blocks, multiplied without expanding them.
    Blocks(BlockQuantized),
}

impl Matrix {
    /// `x @ W^T` (`x` `[..., in]`).
    pub fn apply(&self, x: &DynTensor) -> Result<DynTensor> {
        match self {
            Matrix::Dense(w) => x.linear(w, None),
            Matrix::Blocks(w) => w.product(x),
        }
    }

    /// Rows `ids` as f32 (an embedding lookup).
    pub fn rows(&self, ids: &[i64]) -> Result<DynTensor> {
        match self {
            Matrix::Dense(w) => {
                let ids = DynTensor::from_vec(ids.to_vec(), &[ids.len()])?.to(&w.device())?;
                w.index_select(0, &ids)
            }
            Matrix::Blocks(w) => w.rows(ids),
        }
    }

    /// The matrix dense in `dtype` on `device` (blocks expanded).
    pub fn dense_on(&self, device: &Device, dtype: DType) -> Result<Matrix> {
        let dense = match self {
            Matrix::Dense(w) => w.clone(),
            Matrix::Blocks(w) => w.dequantize()?,
        };
        Ok(Matrix::Dense(dense.to_dtype(dtype)?.to(device)?))
    }

    /// Bytes its values take.
    pub fn bytes(&self) -> usize {
        match self {
            Matrix::Dense(w) => w.numel() * w.dtype().size_in_bytes(),
            Matrix::Blocks(w) => w.bytes(),
        }
    }
}
