//! A Llama weight matrix as the model holds it: dense (f32 on the CPU; f32, f16 or bf16 on a
//! device), or in the file's 4- and 8-bit blocks.

use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::nn::block_quantized::BlockQuantized;
use crate::tensor::DynTensor;

/// A `[out, in]` weight matrix.
#[derive(Clone)]
pub(super) enum Matrix {
    /// Dense values: f32 on the CPU (read from f32/f16/bf16 tensors, or dequantized), in the
    /// model's dtype on a device ([`Matrix::dense_on`]).
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

    /// Its output width (rows).
    pub fn out_features(&self) -> usize {
        match self {
            Matrix::Dense(w) => w.dims()[0],
            Matrix::Blocks(w) => w.dims()[0],
        }
    }

    /// Bytes its values take.
    pub fn bytes(&self) -> usize {
        match self {
            Matrix::Dense(w) => w.numel() * w.dtype().size_in_bytes(),
            Matrix::Blocks(w) => w.bytes(),
        }
    }
}

/// Matrices that multiply the same input (a block's query, key and value projections; its
/// gate and up projections). Dense ones of one dtype and device are stacked into one: one
/// product instead of several, the outputs split after (on a GPU each product is a launch,
/// and at batch 1 decoding is bound by launches). Block matrices stay apart: stacked, the
/// CPU's decoding measured 1-3% slower on two threads.
#[derive(Clone)]
pub(super) struct Projections {
    /// The matrices' output widths, in order.
    widths: Vec<usize>,
    matrices: Stacked,
}

#[derive(Clone)]
enum Stacked {
    /// One matrix, the others' rows after the first's.
    One(Matrix),
    Apart(Vec<Matrix>),
}

impl Projections {
    /// `matrices` (each `[out_i, in]`), stacked where all are dense alike.
    pub fn new(matrices: Vec<Matrix>) -> Result<Projections> {
        let widths = matrices.iter().map(Matrix::out_features).collect();
        let dense: Option<Vec<&DynTensor>> = matrices
            .iter()
            .map(|m| match m {
                Matrix::Dense(w) => Some(w),
                Matrix::Blocks(_) => None,
            })
            .collect();
        let stackable = dense.filter(|d| {
            d.iter().all(|w| {
                w.dtype() == d[0].dtype()
                    && w.device() == d[0].device()
                    && w.dims()[1..] == d[0].dims()[1..]
            })
        });
        let matrices = match stackable {
            Some(dense) if dense.len() > 1 => {
                Stacked::One(Matrix::Dense(DynTensor::cat(&dense, 0)?))
            }
            _ => Stacked::Apart(matrices),
        };
        Ok(Projections { widths, matrices })
    }

    /// Each matrix's `x @ W^T`, in order (views of one product where stacked).
    pub fn apply(&self, x: &DynTensor) -> Result<Vec<DynTensor>> {
        match &self.matrices {
            Stacked::Apart(matrices) => matrices.iter().map(|m| m.apply(x)).collect(),
            Stacked::One(matrix) => {
                let all = matrix.apply(x)?;
                let mut start = 0;
                self.widths
                    .iter()
                    .map(|&width| {
                        let part = all.narrow(-1, start, width);
                        start += width;
                        part
                    })
                    .collect()
            }
        }
    }

    /// The same matrices dense in `dtype` on `device`, stacked (on the host, where every
    /// dtype joins, then moved).
    pub fn dense_on(&self, device: &Device, dtype: DType) -> Result<Projections> {
        let stacked = match &self.matrices {
            Stacked::One(m) => Projections {
                widths: self.widths.clone(),
                matrices: Stacked::One(m.dense_on(&Device::Cpu, dtype)?),
            },
            Stacked::Apart(ms) => Projections::new(
                ms.iter()
                    .map(|m| m.dense_on(&Device::Cpu, dtype))
                    .collect::<Result<_>>()?,
            )?,
        };
        let matrices = match stacked.matrices {
            Stacked::One(m) => Stacked::One(m.dense_on(device, dtype)?),
            Stacked::Apart(ms) => Stacked::Apart(
                ms.iter()
                    .map(|m| m.dense_on(device, dtype))
                    .collect::<Result<_>>()?,
            ),
        };
        Ok(Projections {
            widths: stacked.widths,
            matrices,
        })
    }

    /// Bytes their values take.
    pub fn bytes(&self) -> usize {
        match &self.matrices {
            Stacked::One(m) => m.bytes(),
            Stacked::Apart(ms) => ms.iter().map(Matrix::bytes).sum(),
        }
    }
}
