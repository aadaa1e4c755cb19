//! Anomaly mode (PyTorch's `torch.autograd.detect_anomaly`): while a guard from
//! [`detect_anomaly`] lives, every op checks its output, and every backward record the
//! gradients it computes, and the first one to turn finite values into NaN or infinity
//! fails with an error naming the op, its operands' shapes and the `#[model]` field
//! (`encoder.fc1`) it ran in. Slow (every value is read back): a tool for finding where a
//! loss became NaN, not for training.

use super::hooks::{OpCall, set_anomaly_flag};
use crate::autograd::anomaly::{describe_non_finite, non_finite, set_anomaly_enabled};
use crate::error::{AutogradError, Result};
use crate::tensor::DynTensor;

/// Turns anomaly mode on for this thread until the guard drops.
///
/// ```
/// use rumus::prelude::*;
///
/// let x = DynTensor::from_vec(vec![1.0f32, 0.0], &[2])?;
/// let _anomaly = rumus::detect_anomaly();
/// // 1 / 0 is infinite: the division is named, with its shapes.
/// let error = x.powf(-1.0).unwrap_err().to_string();
/// assert!(error.contains("Pow") && error.contains("[2]"), "{error}");
/// # Ok::<(), rumus::Error>(())
/// ```
#[must_use = "anomaly mode lasts as long as the guard"]
pub fn detect_anomaly() -> AnomalyGuard {
    let previous = set_anomaly_enabled(true);
    set_anomaly_flag(true);
    super::fields::watch(true);
    AnomalyGuard { previous }
}

/// Keeps anomaly mode on while it lives; see [`detect_anomaly`].
pub struct AnomalyGuard {
    previous: bool,
}

impl Drop for AnomalyGuard {
    fn drop(&mut self) {
        set_anomaly_enabled(self.previous);
        set_anomaly_flag(self.previous);
        super::fields::watch(false);
    }
}

/// An error when `output` holds NaN or infinity although every operand is finite.
pub(crate) fn check_forward(
    call: &OpCall<'_>,
    operands: &[&DynTensor],
    output: &DynTensor,
) -> Result<()> {
    let bad = non_finite(output);
    if bad == (0, 0) || operands.iter().any(|t| non_finite(t) != (0, 0)) {
        return Ok(());
    }
    // `Linear`, `Conv2d { .. }` -> `Conv2d`, `Unary(Log)` -> `Log`.
    let name = format!("{call:?}");
    let name = name.split(" {").next().unwrap_or_default();
    let op = ["Unary(", "Binary(", "Compare("]
        .iter()
        .find_map(|wrapper| name.strip_prefix(wrapper)?.strip_suffix(')'))
        .unwrap_or(name);
    let shapes: Vec<String> = operands.iter().map(|t| format!("{:?}", t.dims())).collect();
    let shapes = match shapes.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => shapes.join(""),
    };
    let field = super::fields::current_path();
    let mut place = if field.is_empty() {
        String::new()
    } else {
        format!(" in `{field}`")
    };
    if let Some(record) = crate::autograd::anomaly::backward_of() {
        place.push_str(&format!(" (in the backward pass of `{record}`)"));
    }
    Err(AutogradError::Anomaly {
        message: format!(
            "`{op}`{place} on {shapes} gave {} in its {:?} output from finite inputs; look at what it divides by, takes the log or the square root of, or exponentiates",
            describe_non_finite(bad, output.numel()),
            output.dims(),
        ),
    }
    .into())
}
