//! Automatic mixed precision (PyTorch's `torch.autocast` and `GradScaler`). Inside an
//! [`autocast`] scope, matrix products — `matmul`, `linear`, and the convolutions and
//! attention built on them — of `f32` tensors round their operands to `f16` and run on the
//! `f16` product (the GPU's matrix units, accumulating in `f32`); their results, like
//! everything else (reductions, norms, softmax, losses), stay `f32`. Parameters stay `f32`
//! (the master weights), and the backward pass runs the products of recorded ops in `f16` the
//! same way, whatever scope it is called in.
//!
//! Gradients of `f16` products underflow when small: scale the loss with a
//! [`GradScaler`].
//!
//! On the CPU the `f16` product runs on the `f32` kernel with the same roundings, so a
//! model's behaviour under autocast can be checked anywhere, but it is slower than plain
//! `f32` there: the speed is a GPU's.
//!
//! ```
//! use rumus::DynTensor;
//! use rumus::amp::autocast;
//!
//! # fn main() -> rumus::Result<()> {
//! let a = DynTensor::from_vec(vec![1.0f32 / 3.0; 4], &[2, 2])?;
//! let exact = a.matmul(&a)?.to_vec::<f32>()?[0];
//! let half = {
//!     let _autocast = autocast();
//!     a.matmul(&a)?.to_vec::<f32>()?[0]
//! };
//! assert_ne!(exact, half); // 1/3 rounded to f16 first
//! assert!((exact - half).abs() < 1e-3);
//! # Ok(())
//! # }
//! ```

use std::cell::Cell;

pub use crate::optim::{GradScaler, GradScalerConfig};

use crate::autograd::{BackwardOp, Saved, record};
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Dims;
use crate::tensor::DynTensor;

thread_local! {
    static AUTOCAST: Cell<bool> = const { Cell::new(false) };
}

/// Whether products on this thread run in `f16` now.
pub fn is_autocast_enabled() -> bool {
    AUTOCAST.with(Cell::get)
}

/// Restores the previous autocast state when dropped.
#[must_use = "autocast is only on while the guard is alive: bind it with `let _autocast = ...`"]
pub struct AutocastGuard {
    previous: bool,
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        AUTOCAST.with(|flag| flag.set(self.previous));
    }
}

fn set_autocast(enabled: bool) -> AutocastGuard {
    AutocastGuard {
        previous: AUTOCAST.with(|flag| flag.replace(enabled)),
    }
}

/// Runs `f32` matrix products of this thread in `f16` until the guard drops. The flag is
/// per thread, like [`no_grad`](crate::no_grad).
pub fn autocast() -> AutocastGuard {
    set_autocast(true)
}

/// Turns autocast off until the guard drops (a region that needs full precision inside an
/// autocast scope).
pub fn autocast_disabled() -> AutocastGuard {
    set_autocast(false)
}

/// Whether a product of `lhs` and `rhs` (and `bias`) is autocast now.
pub(crate) fn applies(lhs: &DynTensor, rhs: &DynTensor) -> bool {
    is_autocast_enabled() && lhs.dtype() == DType::F32 && rhs.dtype() == DType::F32
}

/// `lhs @ rhs (+ bias)` with the operands rounded to `f16`, the product on the `f16` kernel
/// and the result (plus the `f32` bias) in `f32`; recorded as the `f32` op, whose backward
/// runs its own products under autocast.
pub(crate) fn product(
    lhs: &DynTensor,
    rhs: &DynTensor,
    bias: Option<&DynTensor>,
) -> Result<DynTensor> {
    let out = {
        // The f16 kernel on the host widens to f32 products, which must not come back here.
        let _off = autocast_disabled();
        let half = |t: &DynTensor| t.detach().to_dtype(DType::F16);
        let out = half(lhs)?.matmul(&half(rhs)?)?.to_dtype(DType::F32)?;
        match bias {
            Some(bias) => out.add(&bias.detach())?,
            None => out,
        }
    };
    let op = || match bias {
        None => BackwardOp::Matmul {
            lhs: Saved::new(lhs),
            rhs: Saved::new(rhs),
        },
        Some(bias) => BackwardOp::Linear {
            input: Saved::new(lhs),
            weight_t: Saved::new(rhs),
            bias_dims: Dims::from_slice(bias.dims()),
        },
    };
    let inputs: Vec<&DynTensor> = [lhs, rhs].into_iter().chain(bias).collect();
    Ok(record(out, &inputs, || {
        BackwardOp::Autocast(Box::new(op()))
    }))
}

/// The backward pass of an op recorded under autocast: its formula, with autocast on.
pub(crate) fn autocast_backward(
    op: &BackwardOp,
    grad: &DynTensor,
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let _autocast = autocast();
    op.backward(grad, needs)
}
