//! Loss functions with PyTorch's semantics and defaults (`torch.nn.functional`).
//!
//! Every loss is written with differentiable [`DynTensor`] ops, so its gradient, and the
//! gradient of that gradient, come from the ops' own backward formulas. The formulations are
//! the numerically stable ones: cross-entropy goes through `log_softmax`, the logits form of
//! binary cross-entropy through `softplus`, never through `log(sigmoid(x))`.
//!
//! Differences from PyTorch, all deliberate:
//! - input and target must have the same shape (PyTorch broadcasts some losses with a
//!   warning); a mismatch is an error naming both shapes.
//! - class weights (`weight=`) are not supported, nor probability targets for
//!   [`cross_entropy`]; targets are `i64` class indices.
//! - [`CrossEntropyOptions::ignore_index`] is an `Option`: `None` ignores no label. The
//!   default is PyTorch's `Some(-100)`.
//!
//! ```
//! use rumus::nn::{CrossEntropyOptions, cross_entropy};
//! use rumus::{DType, DynTensor};
//!
//! # fn main() -> rumus::Result<()> {
//! let logits = DynTensor::zeros(&[2, 3], DType::F32)?.requires_grad_()?;
//! let targets = DynTensor::from_vec(vec![2i64, 0], &[2])?;
//! let loss = cross_entropy(&logits, &targets, &CrossEntropyOptions::default())?;
//! assert!((loss.item::<f32>()? - 3f32.ln()).abs() < 1e-6);
//! # Ok(())
//! # }
//! ```

use crate::dtype::DType;
use crate::error::{Error, Result, ShapeError};
use crate::shape::broadcast_shapes;
use crate::tensor::DynTensor;

/// How a loss combines its per-element values (PyTorch's `reduction=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Reduction {
    /// The mean over elements; for class-index losses, over the targets not ignored.
    #[default]
    Mean,
    /// The sum over elements.
    Sum,
    /// No reduction: one loss per element (per target for class-index losses).
    None,
}

/// The reductions of [`kl_div`]: [`Reduction`]'s plus `BatchMean`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KlReduction {
    /// The mean over every element (PyTorch's default, which it warns about: it is not the
    /// KL divergence; `BatchMean` is).
    #[default]
    Mean,
    /// The sum divided by the size of the first axis: the KL divergence per sample.
    BatchMean,
    /// The sum over elements.
    Sum,
    /// No reduction: one value per element.
    None,
}

impl From<Reduction> for KlReduction {
    fn from(reduction: Reduction) -> Self {
        match reduction {
            Reduction::Mean => KlReduction::Mean,
            Reduction::Sum => KlReduction::Sum,
            Reduction::None => KlReduction::None,
        }
    }
}

/// Options of [`cross_entropy`]; `Default` gives PyTorch's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CrossEntropyOptions {
    /// How the per-target losses combine. Default: `Mean`.
    pub reduction: Reduction,
    /// Targets equal to this label contribute nothing, and `Mean` divides by the number of
    /// the others. `None` ignores no label. Default: `Some(-100)`, as PyTorch.
    pub ignore_index: Option<i64>,
    /// In `[0, 1]`: the target distribution becomes `1 - s` on the label plus `s / C` on
    /// every class. Ignored targets stay ignored. Default: 0.
    pub label_smoothing: f64,
}

impl Default for CrossEntropyOptions {
    fn default() -> Self {
        CrossEntropyOptions {
            reduction: Reduction::Mean,
            ignore_index: Some(-100),
            label_smoothing: 0.0,
        }
    }
}

/// Options of [`nll_loss`]; `Default` gives PyTorch's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NllLossOptions {
    /// How the per-target losses combine. Default: `Mean`.
    pub reduction: Reduction,
    /// As [`CrossEntropyOptions::ignore_index`]. Default: `Some(-100)`.
    pub ignore_index: Option<i64>,
}

impl Default for NllLossOptions {
    fn default() -> Self {
        NllLossOptions {
            reduction: Reduction::Mean,
            ignore_index: Some(-100),
        }
    }
}

/// `ln(1 + e^z)` is `z` to within `f64` rounding above this (`e^-40 < 5e-18`), and `e^40` is
/// still finite in `f32`; so `softplus` with this threshold is exact in both precisions.
const SOFTPLUS_LINEAR_ABOVE: f64 = 40.0;

/// PyTorch floors the logarithms of binary cross-entropy here, so a probability of exactly
/// 0 or 1 gives a finite loss.
const BCE_LOG_FLOOR: f64 = -100.0;

// ---- checks ----

fn float_input(op: &'static str, input: &DynTensor) -> Result<()> {
    if input.dtype().is_float() {
        Ok(())
    } else {
        Err(Error::DType {
            op,
            expected: "a floating-point input",
            found: input.dtype(),
        })
    }
}

/// Input and target of an element-wise loss: floating-point, one dtype, one shape.
fn check_pair(op: &'static str, input: &DynTensor, target: &DynTensor) -> Result<()> {
    float_input(op, input)?;
    if input.dtype() != target.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            lhs: input.dtype(),
            rhs: target.dtype(),
        });
    }
    if input.dims() != target.dims() {
        return Err(ShapeError::Invalid {
            context: op.into(),
            message: format!(
                "input has shape {:?} but target has shape {:?}; they must be equal (losses do not broadcast)",
                input.dims(),
                target.dims()
            ),
        }
        .into());
    }
    Ok(())
}

/// The coordinates of row-major element `flat` in `dims`.
fn position(mut flat: usize, dims: &[usize]) -> Vec<usize> {
    let mut at = vec![0; dims.len()];
    for (slot, &d) in at.iter_mut().zip(dims).rev() {
        *slot = flat % d;
        flat /= d;
    }
    at
}

fn reduce(loss: DynTensor, reduction: Reduction) -> Result<DynTensor> {
    match reduction {
        Reduction::Mean => loss.mean_all(),
        Reduction::Sum => loss.sum_all(),
        Reduction::None => Ok(loss),
    }
}

// ---- regression losses ----

/// Mean squared error: `(input - target)^2`, reduced.
pub fn mse_loss(input: &DynTensor, target: &DynTensor, reduction: Reduction) -> Result<DynTensor> {
    check_pair("mse_loss", input, target)?;
    let diff = input.sub(target)?;
    reduce(diff.mul(&diff)?, reduction)
}

/// Mean absolute error: `|input - target|`, reduced (gradient 0 where they are equal).
pub fn l1_loss(input: &DynTensor, target: &DynTensor, reduction: Reduction) -> Result<DynTensor> {
    check_pair("l1_loss", input, target)?;
    reduce(input.sub(target)?.abs()?, reduction)
}

/// With `z = |input - target|`: `0.5 z^2 / beta` where `z < beta`, `z - 0.5 beta` elsewhere.
/// `beta` must be non-negative; `beta = 0` is [`l1_loss`]. PyTorch's default `beta` is 1.
pub fn smooth_l1_loss(
    input: &DynTensor,
    target: &DynTensor,
    beta: f64,
    reduction: Reduction,
) -> Result<DynTensor> {
    check_pair("smooth_l1_loss", input, target)?;
    if beta.is_nan() || beta < 0.0 {
        return Err(Error::InvalidArgument {
            op: "smooth_l1_loss",
            message: format!("beta must be non-negative, got {beta}"),
        });
    }
    if beta == 0.0 {
        return l1_loss(input, target, reduction);
    }
    let diff = input.sub(target)?;
    let z = diff.abs()?;
    let quadratic = diff.mul(&diff)?.mul_scalar(0.5 / beta)?;
    let linear = z.sub_scalar(0.5 * beta)?;
    reduce(
        DynTensor::where_(&z.lt_scalar(beta)?, &quadratic, &linear)?,
        reduction,
    )
}

/// With `z = |input - target|`: `0.5 z^2` where `z < delta`, `delta (z - 0.5 delta)`
/// elsewhere (`delta` times [`smooth_l1_loss`] with `beta = delta`). `delta` must be
/// positive; PyTorch's default is 1.
pub fn huber_loss(
    input: &DynTensor,
    target: &DynTensor,
    delta: f64,
    reduction: Reduction,
) -> Result<DynTensor> {
    check_pair("huber_loss", input, target)?;
    if delta.is_nan() || delta <= 0.0 {
        return Err(Error::InvalidArgument {
            op: "huber_loss",
            message: format!("delta must be positive, got {delta}"),
        });
    }
    let diff = input.sub(target)?;
    let z = diff.abs()?;
    let quadratic = diff.mul(&diff)?.mul_scalar(0.5)?;
    let linear = z.sub_scalar(0.5 * delta)?.mul_scalar(delta)?;
    reduce(
        DynTensor::where_(&z.lt_scalar(delta)?, &quadratic, &linear)?,
        reduction,
    )
}

// ---- classification with class-index targets ----

/// Class-index targets, checked and laid out for `gather` along axis 1.
#[derive(Clone)]
pub(super) struct ClassTargets {
    /// `[N, 1, d1, ...]` labels, ignored ones replaced by class 0.
    pub(super) gather_index: DynTensor,
    /// `[N, d1, ...]`: true where the target is not ignored.
    pub(super) counted: DynTensor,
    /// Number of targets not ignored (the divisor of `Mean`).
    pub(super) count: usize,
    pub(super) classes: usize,
    /// The input was a single sample `[C]` with a rank-0 target.
    pub(super) unbatched: bool,
}

/// Checks scores `[C]`, `[N, C]` or `[N, C, d1, ...]` against `i64` targets `[]`, `[N]` or
/// `[N, d1, ...]`, and returns the scores with a batch axis and the prepared targets.
fn class_targets(
    op: &'static str,
    input: &DynTensor,
    targets: &DynTensor,
    ignore_index: Option<i64>,
) -> Result<(DynTensor, ClassTargets)> {
    float_input(op, input)?;
    if input.rank() == 0 {
        return Err(ShapeError::Invalid {
            context: op.into(),
            message: "the input needs a class axis: shape [C], [N, C] or [N, C, d1, ...], got a rank-0 tensor".into(),
        }
        .into());
    }
    if targets.dtype() != DType::I64 {
        return Err(Error::DType {
            op,
            expected: "an i64 tensor of class indices as the target",
            found: targets.dtype(),
        });
    }
    let unbatched = input.rank() == 1;
    let class_axis = if unbatched { 0 } else { 1 };
    let classes = input.dims()[class_axis];
    let mut expected = input.dims().to_vec();
    expected.remove(class_axis);
    if targets.dims() != expected {
        return Err(ShapeError::Invalid {
            context: op.into(),
            message: format!(
                "the input has shape {:?}, so the target needs shape {expected:?} (the input's shape without the class axis {class_axis}), but it has shape {:?}",
                input.dims(),
                targets.dims()
            ),
        }
        .into());
    }
    if classes == 0 {
        return Err(ShapeError::Invalid {
            context: op.into(),
            message: format!(
                "the input has shape {:?}: its class axis {class_axis} is empty",
                input.dims()
            ),
        }
        .into());
    }
    let labels = targets.to_vec::<i64>()?;
    let mut index = Vec::with_capacity(labels.len());
    let mut counted = Vec::with_capacity(labels.len());
    for (flat, &label) in labels.iter().enumerate() {
        if Some(label) == ignore_index {
            index.push(0);
            counted.push(false);
        } else if (0..classes as i64).contains(&label) {
            index.push(label);
            counted.push(true);
        } else {
            let ignored = match ignore_index {
                Some(ignored) => format!(", or the ignore_index {ignored}"),
                None => String::new(),
            };
            return Err(Error::InvalidArgument {
                op,
                message: format!(
                    "target {label} at position {:?} is not a class index for {classes} classes (valid: 0..{classes}{ignored})",
                    position(flat, targets.dims())
                ),
            });
        }
    }
    let count = counted.iter().filter(|&&c| c).count();
    let (input, target_dims) = if unbatched {
        (input.unsqueeze(0)?, vec![1])
    } else {
        (input.clone(), expected)
    };
    let mut index_dims = target_dims.clone();
    index_dims.insert(1, 1);
    let device = input.device();
    Ok((
        input,
        ClassTargets {
            gather_index: DynTensor::from_vec(index, &index_dims)?.to(&device)?,
            counted: DynTensor::from_vec(counted, &target_dims)?.to(&device)?,
            count,
            classes,
            unbatched,
        },
    ))
}

impl ClassTargets {
    /// `values` (one per target, `[N, d1, ...]`) with ignored targets set to exactly 0.
    pub(super) fn mask(&self, values: &DynTensor) -> Result<DynTensor> {
        DynTensor::where_(
            &self.counted,
            values,
            &DynTensor::scalar(0.0, values.dtype())?,
        )
    }

    /// `-log_probs[n, target[n, ...], ...]`, 0 for ignored targets.
    pub(super) fn negative_picked(&self, log_probs: &DynTensor) -> Result<DynTensor> {
        let picked = log_probs.gather(1, &self.gather_index)?.squeeze(1)?;
        self.mask(&picked.neg()?)
    }

    /// `Mean` divides by the number of targets not ignored (NaN when there are none, as in
    /// PyTorch).
    pub(super) fn reduce(&self, per_target: DynTensor, reduction: Reduction) -> Result<DynTensor> {
        match reduction {
            Reduction::Mean => per_target
                .sum_all()?
                .div(&DynTensor::scalar(self.count as f64, per_target.dtype())?),
            Reduction::Sum => per_target.sum_all(),
            Reduction::None if self.unbatched => per_target.squeeze(0),
            Reduction::None => Ok(per_target),
        }
    }
}

/// Cross-entropy of `logits` (`[N, C]`, `[N, C, d1, ...]` or a single sample `[C]`) against
/// `i64` class indices `targets` (`[N]`, `[N, d1, ...]` or `[]`): `-log_softmax(logits)` at
/// each target, with PyTorch's `ignore_index` and `label_smoothing`.
///
/// With smoothing `s` the loss is `(1 - s) * nll + (s / C) * sum_c(-log_softmax)`, each term
/// reduced over the targets not ignored, exactly as PyTorch computes it.
///
/// A target outside `0..C` that is not the ignore index is an error naming the label, its
/// position and `C`.
pub fn cross_entropy(
    logits: &DynTensor,
    targets: &DynTensor,
    options: &CrossEntropyOptions,
) -> Result<DynTensor> {
    const OP: &str = "cross_entropy";
    let smoothing = options.label_smoothing;
    if !(0.0..=1.0).contains(&smoothing) {
        return Err(Error::InvalidArgument {
            op: OP,
            message: format!("label_smoothing must be in [0, 1], got {smoothing}"),
        });
    }
    let (logits, targets) = class_targets(OP, logits, targets, options.ignore_index)?;
    if smoothing == 0.0 && matches!(logits.dtype(), DType::F32 | DType::F64) {
        return super::fused_cross_entropy::cross_entropy(&logits, targets, options.reduction);
    }
    let log_probs = logits.log_softmax(1)?;
    let nll = targets.reduce(targets.negative_picked(&log_probs)?, options.reduction)?;
    if smoothing == 0.0 {
        return Ok(nll);
    }
    let uniform = targets.mask(&log_probs.sum(&[1], false)?.neg()?)?;
    let uniform = targets.reduce(uniform, options.reduction)?;
    nll.mul_scalar(1.0 - smoothing)?
        .add(&uniform.mul_scalar(smoothing / targets.classes as f64)?)
}

/// Negative log-likelihood: `-log_probs` at each target, for `log_probs` laid out as the
/// logits of [`cross_entropy`] (usually `log_softmax` over axis 1). Same targets and errors.
pub fn nll_loss(
    log_probs: &DynTensor,
    targets: &DynTensor,
    options: &NllLossOptions,
) -> Result<DynTensor> {
    let (log_probs, targets) = class_targets("nll_loss", log_probs, targets, options.ignore_index)?;
    targets.reduce(targets.negative_picked(&log_probs)?, options.reduction)
}

// ---- binary classification ----

/// `max(ln x, -100)`, with no gradient where the floor applies (rather than `0 * inf`).
fn floored_log(x: &DynTensor) -> Result<DynTensor> {
    let floored = x.detach().log()?.lt_scalar(BCE_LOG_FLOOR)?;
    let safe = DynTensor::where_(&floored, &DynTensor::scalar(1.0, x.dtype())?, x)?;
    DynTensor::where_(
        &floored,
        &DynTensor::scalar(BCE_LOG_FLOOR, x.dtype())?,
        &safe.log()?,
    )
}

/// Binary cross-entropy of probabilities: `-(y ln p + (1 - y) ln(1 - p))`, each logarithm
/// floored at -100 as in PyTorch, so `p` of exactly 0 or 1 gives a finite loss.
///
/// Like PyTorch on the CPU, a probability outside `[0, 1]` (or NaN) is an error naming its
/// position. Where a logarithm is floored its term has no gradient; PyTorch's backward
/// instead divides by `max(p (1 - p), 1e-12)`, so the two differ only for `p` within about
/// `1e-12` of 0 or 1. Prefer [`binary_cross_entropy_with_logits`], which is stable.
pub fn binary_cross_entropy(
    probs: &DynTensor,
    target: &DynTensor,
    reduction: Reduction,
) -> Result<DynTensor> {
    const OP: &str = "binary_cross_entropy";
    check_pair(OP, probs, target)?;
    let values = probs.try_to_f64_vec()?;
    if let Some((flat, value)) = values
        .iter()
        .enumerate()
        .find(|(_, v)| !(0.0..=1.0).contains(*v))
    {
        return Err(Error::InvalidArgument {
            op: OP,
            message: format!(
                "probabilities must lie in [0, 1], but the input at position {:?} is {value}",
                position(flat, probs.dims())
            ),
        });
    }
    let log_p = floored_log(probs)?;
    let log_not_p = floored_log(&probs.rsub_scalar(1.0)?)?;
    let loss = target
        .mul(&log_p)?
        .add(&target.rsub_scalar(1.0)?.mul(&log_not_p)?)?
        .neg()?;
    reduce(loss, reduction)
}

/// Binary cross-entropy of `sigmoid(logits)`, computed stably from the logits:
/// `(1 - y) x + w ln(1 + e^-x)` with `w = 1 + (pos_weight - 1) y` (`w = 1` without
/// `pos_weight`). `pos_weight` weighs the positive term; it must broadcast to the target's
/// shape (typically `[C]` for targets `[N, C]`). Like PyTorch, no gradient flows to it.
pub fn binary_cross_entropy_with_logits(
    logits: &DynTensor,
    target: &DynTensor,
    pos_weight: Option<&DynTensor>,
    reduction: Reduction,
) -> Result<DynTensor> {
    const OP: &str = "binary_cross_entropy_with_logits";
    check_pair(OP, logits, target)?;
    // ln(1 + e^-x): smooth everywhere, so the gradient at x = 0 is sigmoid(0) - y.
    let softplus = logits.neg()?.softplus(1.0, SOFTPLUS_LINEAR_ABOVE)?;
    let positive = match pos_weight {
        None => softplus,
        Some(weight) => {
            if weight.dtype() != logits.dtype() {
                return Err(Error::DTypeMismatch {
                    op: OP,
                    lhs: logits.dtype(),
                    rhs: weight.dtype(),
                });
            }
            let context = format!("{OP} pos_weight");
            if broadcast_shapes(weight.dims(), target.dims(), &context)?.as_slice() != target.dims()
            {
                return Err(ShapeError::Invalid {
                    context,
                    message: format!(
                        "pos_weight has shape {:?}, which does not broadcast to the target's shape {:?}",
                        weight.dims(),
                        target.dims()
                    ),
                }
                .into());
            }
            let weight = weight
                .detach()
                .sub_scalar(1.0)?
                .mul(target)?
                .add_scalar(1.0)?;
            weight.mul(&softplus)?
        }
    };
    let loss = target.rsub_scalar(1.0)?.mul(logits)?.add(&positive)?;
    reduce(loss, reduction)
}

// ---- distributions ----

/// Kullback-Leibler divergence `KL(target || input)` pointwise, with `input` given as
/// log-probabilities: `target (ln target - input)`, or with `log_target`,
/// `e^target (target - input)`. A zero target contributes 0 (`0 ln 0 = 0`), and its
/// gradient with respect to the target is taken as `-input` there (the true one is
/// `-inf`; PyTorch reports NaN). A negative target gives NaN, as in PyTorch.
///
/// Use [`KlReduction::BatchMean`] for the divergence itself; `Mean` (PyTorch's default)
/// also divides by the number of classes.
pub fn kl_div(
    input: &DynTensor,
    target: &DynTensor,
    reduction: KlReduction,
    log_target: bool,
) -> Result<DynTensor> {
    check_pair("kl_div", input, target)?;
    let pointwise = if log_target {
        target.exp()?.mul(&target.sub(input)?)?
    } else {
        // t ln t with ln(1) standing in at t = 0, where the product is 0 either way.
        let zero = target.detach().eq_scalar(0.0)?;
        let safe = DynTensor::where_(&zero, &DynTensor::scalar(1.0, target.dtype())?, target)?;
        target.mul(&safe.log()?)?.sub(&target.mul(input)?)?
    };
    match reduction {
        KlReduction::Mean => pointwise.mean_all(),
        KlReduction::Sum => pointwise.sum_all(),
        KlReduction::None => Ok(pointwise),
        KlReduction::BatchMean => {
            let total = pointwise.sum_all()?;
            match input.dims().first() {
                Some(&batch) => total.div(&DynTensor::scalar(batch as f64, total.dtype())?),
                None => Ok(total),
            }
        }
    }
}
