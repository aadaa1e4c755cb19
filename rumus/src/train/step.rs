//! What one training or evaluation step reports to the [`Trainer`](super::Trainer): the
//! batch's mean loss and size, and the model's output with its target for the trainer's
//! [`Metric`](super::Metric)s.

use crate::error::{Error, Result};
use crate::nn::{CrossEntropyOptions, cross_entropy};
use crate::tensor::DynTensor;

/// One batch as a step reports it.
#[derive(Debug, Clone)]
pub struct StepOutput {
    /// The batch's mean loss.
    pub loss: f64,
    /// The examples in the batch (what the loss is a mean over).
    pub count: usize,
    /// The model's output and the target, detached, for the metrics; `None` when the step
    /// reports the loss only.
    pub prediction: Option<(DynTensor, DynTensor)>,
}

impl StepOutput {
    /// A batch whose mean loss is the one-element tensor `loss`, with the model's
    /// `prediction` and its `target` for the metrics; the batch size is the target's first
    /// dim (1 for a scalar target). Reading the loss waits for a GPU.
    pub fn new(loss: &DynTensor, prediction: &DynTensor, target: &DynTensor) -> Result<Self> {
        let count = target.dims().first().copied().unwrap_or(1);
        let mut output = StepOutput::loss(loss_value(loss)?, count);
        output.prediction = Some((prediction.detach(), target.detach()));
        Ok(output)
    }

    /// A batch of `count` examples with mean loss `mean_loss` and nothing for the metrics
    /// (a trainer with metrics then fails: they need the prediction).
    pub fn loss(mean_loss: f64, count: usize) -> Self {
        StepOutput {
            loss: mean_loss,
            count,
            prediction: None,
        }
    }
}

/// The value of a one-element loss tensor.
fn loss_value(loss: &DynTensor) -> Result<f64> {
    if loss.numel() != 1 {
        return Err(Error::InvalidArgument {
            op: "StepOutput::new",
            message: format!(
                "the loss has shape {:?}; give the batch's mean loss, one number (`.mean_all()`)",
                loss.dims()
            ),
        });
    }
    Ok(loss.try_to_f64_vec()?[0])
}

/// Cross-entropy of `logits` `[N, C]` against `labels` (`i64` `[N]`), and the step's report
/// with the logits and labels for the metrics ([`Accuracy`](super::Accuracy), ...).
pub fn classification(logits: &DynTensor, labels: &DynTensor) -> Result<(DynTensor, StepOutput)> {
    let loss = cross_entropy(logits, labels, &CrossEntropyOptions::default())?;
    let output = StepOutput::new(&loss, logits, labels)?;
    Ok((loss, output))
}
