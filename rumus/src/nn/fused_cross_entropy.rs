//! Cross-entropy against class indices as one recorded op. Written as `log_softmax`, `gather`
//! and a reduction, its backward pass holds the log-probabilities, a dense gradient scattered
//! from the picked ones and the softmax's gradient at once: three `[N, C]` tensors, which for
//! a language model's 50,304-class logits over 8,192 tokens are 1.6 GB each. As one op its
//! forward pass reads the logits once for each row's log-sum-exp (the loss is `lse - x_t`:
//! no log-probabilities are written) and keeps the logits (alive anyway: they are the output
//! layer's result) and those log-sum-exps; its backward pass writes `(softmax(x) -
//! onehot(target)) * weight` in one pass: two `[N, C]` tensors at its peak, and one kernel
//! on a GPU.

use super::loss::{ClassTargets, Reduction};
use crate::autograd::{BackwardRecord, GraphLinks, Saved, is_grad_enabled, no_grad, record};
use crate::error::Result;
use crate::storage::Storage;
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
    let out = Storage::logsumexp_rows(logits.operand(), 1, "cross_entropy")?;
    let mut dims = logits.dims().to_vec();
    dims[1] = 1;
    Ok(DynTensor::computed(out, &dims))
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
    let pairs = DynTensor::stack(&[&record.lse, &weights], -1)?;
    let out = Storage::cross_entropy_grad(
        logits.operand(),
        pairs.operand(),
        targets.gather_index.operand(),
    )?;
    Ok(DynTensor::computed(out, logits.dims()))
}
