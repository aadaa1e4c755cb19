//! Cross-entropy against class indices as one recorded op. Written as `log_softmax`, `gather`
//! and a reduction, its backward pass holds the log-probabilities, a dense gradient scattered
//! from the picked ones and the softmax's gradient at once: three `[N, C]` tensors, which for
//! a language model's 50,304-class logits over 8,192 tokens are 1.6 GB each. As one op its
//! forward pass reads the logits once for each row's log-sum-exp (the loss is `lse - x_t`:
//! no log-probabilities are written) and keeps the logits (alive anyway: they are the output
//! layer's result) and those log-sum-exps; its backward pass writes `(softmax(x) -
//! onehot(target)) * weight` in one pass: two `[N, C]` tensors at its peak, and one kernel
//! on a GPU.

use rayon::prelude::*;

use super::loss::{ClassTargets, Reduction};
use crate::autograd::{BackwardRecord, GraphLinks, Saved, is_grad_enabled, no_grad, record};
use crate::element::{Element, Float};
use crate::error::Result;
use crate::ops::conv::{FloatSlice, read_float};
use crate::tensor::DynTensor;

/// What the backward pass of [`cross_entropy`](crate::nn::cross_entropy) (one op without
/// label smoothing) needs.
pub struct CrossEntropyRecord {
    logits: Saved,
    /// Each row's log-sum-exp over the classes, `[N, 1, d1, ...]`, untracked.
    lse: DynTensor,
    targets: ClassTargets,
    reduction: Reduction,
}

impl BackwardRecord for CrossEntropyRecord {
    fn name(&self) -> &'static str {
        "cross_entropy"
    }

    fn backward(&self, grad: &DynTensor, _needs: &[bool]) -> Result<Vec<Option<DynTensor>>> {
        Ok(vec![Some(cross_entropy_backward(self, grad)?)])
    }

    fn take_graph(&mut self, links: &mut GraphLinks) {
        links.push_saved(&mut self.logits);
    }
}

/// `cross_entropy` without label smoothing of float `logits` `[N, C, d1, ...]` against
/// prepared `targets`: the values of `-log_softmax(logits)` picked at the targets and
/// reduced, recorded as one op.
pub(super) fn cross_entropy(
    logits: &DynTensor,
    targets: ClassTargets,
    reduction: Reduction,
) -> Result<DynTensor> {
    // -log_softmax(x)_t = lse(x) - x_t: one pass over the logits for the log-sum-exp and a
    // gather, where log_softmax wrote a second [N, C] tensor.
    let loss_and_lse = || -> Result<(DynTensor, DynTensor)> {
        let _untracked = no_grad();
        let lse = class_logsumexp(logits)?;
        let picked = logits.gather(1, &targets.gather_index)?;
        let per_target = targets.mask(&lse.sub(&picked)?.squeeze(1)?)?;
        Ok((targets.reduce(per_target, reduction)?, lse))
    };
    if !(is_grad_enabled() && logits.requires_grad()) {
        return Ok(loss_and_lse()?.0);
    }
    let (loss, lse) = loss_and_lse()?;
    Ok(record(loss, &[logits], || CrossEntropyRecord {
        logits: Saved::new(logits),
        lse,
        targets,
        reduction,
    }))
}

/// Each row's log-sum-exp over the classes (axis 1), `[N, 1, d1, ...]`, in one pass over the
/// logits; an infinite maximum is the result (PyTorch's `logsumexp`), and a row holding a
/// NaN gives NaN, on the host and on a GPU alike.
fn class_logsumexp(logits: &DynTensor) -> Result<DynTensor> {
    #[cfg(feature = "gpu")]
    if let Some(gpu) = crate::device::gpu_of("cross_entropy", &[logits])? {
        return gpu.logsumexp_rows(logits, 1);
    }
    let mut dims = logits.dims().to_vec();
    let classes = std::mem::replace(&mut dims[1], 1);
    let inner: usize = dims[2..].iter().product();
    let buffer = read_float(logits, "cross_entropy", |x| match x {
        FloatSlice::F32(x) => f32::into_buffer(row_logsumexp(x, classes, inner)),
        FloatSlice::F64(x) => f64::into_buffer(row_logsumexp(x, classes, inner)),
    })?;
    Ok(DynTensor::from_buffer(buffer, &dims))
}

/// [`class_logsumexp`] on the host: rows (n, i) of `x` laid out `[N, classes, inner]`, summed
/// in f64.
fn row_logsumexp<T: Float>(x: &[T], classes: usize, inner: usize) -> Vec<T> {
    let rows = x.len() / classes.max(1);
    (0..rows)
        .into_par_iter()
        .map(|r| {
            let first = (r / inner) * classes * inner + r % inner;
            let values = (0..classes).map(|c| x[first + c * inner].to_f64());
            let max = values.clone().fold(f64::NEG_INFINITY, |m, v| {
                if v.is_nan() || m.is_nan() {
                    f64::NAN
                } else {
                    m.max(v)
                }
            });
            if max.is_infinite() || max.is_nan() {
                return T::from_f64(max);
            }
            let sum: f64 = values.map(|v| (v - max).exp()).sum();
            T::from_f64(max + sum.ln())
        })
        .collect()
}

/// The logits' gradient: `(softmax(x) - onehot(target)) * weight`, the weight of each target
/// being the output's gradient (divided by the count under `Mean`, 0 where ignored).
fn cross_entropy_backward(record: &CrossEntropyRecord, grad: &DynTensor) -> Result<DynTensor> {
    let targets = &record.targets;
    let logits = record.logits.get("cross_entropy")?;
    let per_target = match record.reduction {
        Reduction::Mean => grad.div(&DynTensor::scalar(targets.count as f64, grad.dtype())?)?,
        Reduction::Sum => grad.clone(),
        Reduction::None if targets.unbatched => grad.unsqueeze(0)?,
        Reduction::None => grad.clone(),
    };
    // [N, 1, d1, ...], zero for ignored targets.
    let weights = targets.mask(&per_target)?.unsqueeze(1)?;
    if is_grad_enabled() {
        // A recorded backward pass: differentiable in the logits and the weights.
        let onehot = DynTensor::zeros(logits.dims(), logits.dtype())?
            .to(&logits.device())?
            .scatter_add(1, &targets.gather_index, &weights.ones_like()?)?;
        return logits.softmax(1)?.sub(&onehot)?.mul(&weights);
    }
    #[cfg(feature = "gpu")]
    if let Some(gpu) = crate::device::gpu_of("cross_entropy", &[logits, &record.lse, grad])? {
        let pairs = DynTensor::stack(&[&record.lse, &weights], -1)?;
        return gpu.cross_entropy_grad(logits, &pairs, &targets.gather_index);
    }
    on_host(logits, &record.lse, &weights, &targets.gather_index)
}

/// [`cross_entropy_backward`]'s one pass on the host, reading the logits where they are.
fn on_host(
    logits: &DynTensor,
    lse: &DynTensor,
    weights: &DynTensor,
    gather_index: &DynTensor,
) -> Result<DynTensor> {
    // Per row (N x d1 x ...): small.
    let (lse, weights) = (lse.try_to_f64_vec()?, weights.try_to_f64_vec()?);
    let targets = gather_index.to_vec::<i64>()?;
    let dims = logits.dims();
    let rows = Rows {
        classes: dims[1],
        inner: dims[2..].iter().product(),
        lse: &lse,
        weights: &weights,
        targets: &targets,
    };
    let buffer = read_float(logits, "cross_entropy", |x| match x {
        FloatSlice::F32(x) => f32::into_buffer(rows.gradient(x)),
        FloatSlice::F64(x) => f64::into_buffer(rows.gradient(x)),
    })?;
    Ok(DynTensor::from_buffer(buffer, dims))
}

/// What the host's pass reads per row besides the logits.
struct Rows<'a> {
    classes: usize,
    /// Elements of the trailing dims (1 for `[N, C]`).
    inner: usize,
    lse: &'a [f64],
    weights: &'a [f64],
    targets: &'a [i64],
}

impl Rows<'_> {
    fn gradient<T: Float>(&self, x: &[T]) -> Vec<T> {
        x.par_iter()
            .enumerate()
            .map(|(i, &x)| {
                let label = (i / self.inner) % self.classes;
                let at = (i / (self.classes * self.inner)) * self.inner + i % self.inner;
                let hit = if self.targets[at] == label as i64 {
                    T::ONE
                } else {
                    T::ZERO
                };
                ((x - T::from_f64(self.lse[at])).exp() - hit) * T::from_f64(self.weights[at])
            })
            .collect()
    }
}
