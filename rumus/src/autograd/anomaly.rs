//! Whether anomaly mode is on for this thread, and the backward pass's side of it: the
//! first record whose gradients are not finite while the gradient it was given was. The
//! forward side and the switch ([`crate::detect_anomaly`]) live with the ops.

use std::cell::Cell;

use crate::error::{AutogradError, Result};
use crate::tensor::DynTensor;

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
    /// The record whose backward formula is running (its ops are checked like forward ops).
    static BACKWARD_OF: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Runs `f`, the backward formula of the record `op`, so that an anomaly inside it is
/// reported as part of that record's backward pass.
pub(crate) fn in_backward_of<T>(op: &'static str, f: impl FnOnce() -> T) -> T {
    let previous = BACKWARD_OF.with(|b| b.replace(Some(op)));
    let result = f();
    BACKWARD_OF.with(|b| b.set(previous));
    result
}

/// The record whose backward formula is running on this thread, if any.
pub(crate) fn backward_of() -> Option<&'static str> {
    BACKWARD_OF.with(Cell::get)
}

/// Whether anomaly mode is on for this thread.
pub fn anomaly_enabled() -> bool {
    ACTIVE.with(Cell::get)
}

/// Turns anomaly mode on or off for this thread; returns what it was.
pub(crate) fn set_anomaly_enabled(on: bool) -> bool {
    ACTIVE.with(|active| active.replace(on))
}

/// How many of `tensor`'s values are NaN and how many infinite (floats only; integers and
/// unreadable tensors count none).
pub(crate) fn non_finite(tensor: &DynTensor) -> (usize, usize) {
    if !tensor.dtype().is_float() {
        return (0, 0);
    }
    let Ok(values) = tensor.try_to_f64_vec() else {
        return (0, 0);
    };
    values.iter().fold((0, 0), |(nan, inf), v| {
        (
            nan + usize::from(v.is_nan()),
            inf + usize::from(v.is_infinite()),
        )
    })
}

/// `(nan, inf)` of a tensor as words: `3 NaN and 1 infinite values of 12`.
pub(crate) fn describe_non_finite((nan, inf): (usize, usize), of: usize) -> String {
    match (nan, inf) {
        (0, i) => format!("{i} infinite values of {of}"),
        (n, 0) => format!("{n} NaN values of {of}"),
        (n, i) => format!("{n} NaN and {i} infinite values of {of}"),
    }
}

/// Under anomaly mode, an error when the gradients a record computed for its inputs are not
/// finite although the gradient of its output, `grad`, is.
pub(crate) fn check_backward(
    op: &str,
    grad: &DynTensor,
    inputs: &[Option<DynTensor>],
) -> Result<()> {
    if !anomaly_enabled() || non_finite(grad) != (0, 0) {
        return Ok(());
    }
    for (i, input) in inputs.iter().enumerate() {
        let Some(input) = input else { continue };
        let bad = non_finite(input);
        if bad != (0, 0) {
            return Err(AutogradError::Anomaly {
                message: format!(
                    "the backward pass of `{op}` gave the gradient of its input {i} {:?} {} from a finite output gradient {:?}; look at what `{op}` divides by, takes the log or the square root of, or exponentiates",
                    input.dims(),
                    describe_non_finite(bad, input.numel()),
                    grad.dims(),
                ),
            }
            .into());
        }
    }
    Ok(())
}
