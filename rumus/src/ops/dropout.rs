//! Dropout as one op. Each element's keep-or-drop draw is a hash of a seed and its index
//! (`backend::cpu::dropout`, and the same function in `shaders/elementwise.wgsl`), so no mask
//! is kept: the forward pass reads the input and writes the output once, and the backward
//! pass applies the same draws to the gradient. A seed drops the same elements on the CPU and
//! on a GPU.

use crate::autograd::{BackwardOp, record};
use crate::element::Element;
use crate::error::Result;
use crate::ops::conv::{FloatSlice, read_float};
use crate::tensor::DynTensor;

/// `x` with each element zeroed with probability `p` (`0 < p < 1`) and the rest scaled by
/// `1 / (1 - p)`, the draws made from `seed` over `x`'s elements in contiguous order.
pub(crate) fn seeded_dropout(x: &DynTensor, p: f64, seed: u64) -> Result<DynTensor> {
    let scale = 1.0 / (1.0 - p);
    #[cfg(feature = "gpu")]
    if let Some(gpu) = crate::device::gpu_of("dropout", &[x])? {
        let out = gpu.dropout(x, p, scale, seed)?;
        return Ok(record(out, &[x], || BackwardOp::Dropout { p, seed }));
    }
    let buffer = read_float(x, "dropout", |data| match data {
        FloatSlice::F32(v) => f32::into_buffer(crate::backend::cpu::dropout::dropout(
            v,
            p,
            scale as f32,
            seed,
        )),
        FloatSlice::F64(v) => {
            f64::into_buffer(crate::backend::cpu::dropout::dropout(v, p, scale, seed))
        }
    })?;
    let out = DynTensor::from_buffer(buffer, x.dims());
    Ok(record(out, &[x], || BackwardOp::Dropout { p, seed }))
}

/// The input gradient of [`seeded_dropout`]: the same draws applied to `grad` (recorded like
/// the forward op when the backward pass is itself recorded).
pub(crate) fn dropout_backward(grad: &DynTensor, p: f64, seed: u64) -> Result<DynTensor> {
    seeded_dropout(grad, p, seed)
}
