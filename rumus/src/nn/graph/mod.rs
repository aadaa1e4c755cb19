//! Graph neural network layers: message passing over a [`Graph`](crate::sparse::Graph),
//! with node features `[nodes, features]`. Each layer's parameters carry PyTorch
//! Geometric's names (`lin.weight`, `bias`, ...), so a state dict saved from its layer of
//! the same name loads strictly.
//!
//! Node counts are runtime sizes (a graph comes from data); feature widths are the layers'
//! const parameters, as for [`Linear`](super::Linear).

mod gat;
mod gcn;
mod gin;
mod pool;
mod sage;

pub use gat::GatConv;
pub use gcn::GcnConv;
pub use gin::GinConv;
pub use pool::global_pool;
pub use sage::SageConv;

use crate::dtype::DType;
use crate::error::Result;
use crate::sparse::CsrMatrix;

/// `matrix` with its values in `dtype` (the features' dtype), converted only when they
/// differ: a graph keeps its normalised matrices in f32.
fn in_dtype(matrix: &CsrMatrix, dtype: DType) -> Result<CsrMatrix> {
    if matrix.values().dtype() == dtype {
        Ok(matrix.clone())
    } else {
        matrix.with_values(matrix.values().to_dtype(dtype)?)
    }
}

/// A trainable tensor of `dims` (rank >= 2) in f32, uniform in `±sqrt(6 / (rows +
/// columns))` of its last two axes: PyTorch Geometric's `glorot`.
fn glorot(dims: &[usize]) -> Result<crate::DynTensor> {
    let fans = dims[dims.len() - 2] + dims[dims.len() - 1];
    let bound = (6.0 / fans.max(1) as f64).sqrt();
    crate::DynTensor::uniform(dims, -bound, bound, DType::F32)?.requires_grad_()
}

/// A trainable tensor of `dims` in f32, all zeros.
fn zeros(dims: &[usize]) -> Result<crate::DynTensor> {
    crate::DynTensor::zeros(dims, DType::F32)?.requires_grad_()
}
