//! Dropout on the GPU as one op. Each element's keep-or-drop draw is a hash of the seed and
//! its index (`shaders/elementwise.wgsl`), so the forward kernel writes no mask and the
//! backward pass applies the same draws to the gradient: one pass over memory each way
//! instead of a mask kernel and a product forward and a product backward. (The CPU keeps its
//! mask from the global generator's stream; see `nn::functional::dropout`.)

use crate::error::{Error, Result};
use crate::tensor::DynTensor;

/// `x` with each element zeroed with probability `p` and the rest scaled by `1 / (1 - p)`,
/// the draws made from `seed` on `x`'s GPU.
#[cfg(feature = "gpu")]
pub(crate) fn seeded_dropout(
    x: &DynTensor,
    gpu: &crate::backend::gpu::GpuDevice,
    p: f64,
    seed: u64,
) -> Result<DynTensor> {
    use crate::autograd::{BackwardOp, record};
    let out = gpu.dropout(x, p, 1.0 / (1.0 - p), seed)?;
    Ok(record(out, &[x], || BackwardOp::Dropout { p, seed }))
}

/// The input gradient of [`seeded_dropout`]: the same draws applied to `grad` (recorded
/// like the forward op when the backward pass is itself recorded).
pub(crate) fn dropout_backward(grad: &DynTensor, p: f64, seed: u64) -> Result<DynTensor> {
    #[cfg(feature = "gpu")]
    if let Some(gpu) = crate::device::gpu_of("dropout", &[grad])? {
        return seeded_dropout(grad, &gpu, p, seed);
    }
    let _ = seed;
    Err(Error::InvalidArgument {
        op: "dropout",
        message: format!(
            "the gradient of a GPU dropout (p = {p}) arrived on {}; pass the output gradient \
             on the output's device",
            grad.device()
        ),
    })
}
