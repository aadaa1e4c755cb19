//! Metrics as objects the [`Trainer`](super::Trainer) feeds batch by batch, as torchmetrics'
//! and Keras' are: each keeps its own running state (counts, sums, a confusion table), so a
//! metric that is not a mean of per-batch values (F1, perplexity) comes out exact over the
//! epoch. The trainer logs each under `train_<name>` and `eval_<name>` on the console, in the
//! CSV log, on TensorBoard (`train/<name>`) and in the curves.

mod classification;
mod perplexity;
mod regression;

pub use classification::{Accuracy, F1Score};
pub use perplexity::Perplexity;
pub use regression::{MeanAbsoluteError, MeanSquaredError};

use crate::error::{Error, Result};
use crate::optim::Mode;
use crate::tensor::DynTensor;

/// A number computed from a model's predictions and their targets over many batches.
///
/// ```
/// use rumus::optim::Mode;
/// use rumus::train::Metric;
/// use rumus::DynTensor;
///
/// /// The fraction of predictions above their target.
/// #[derive(Default)]
/// struct Overshoot { above: usize, seen: usize }
///
/// impl Metric for Overshoot {
///     fn name(&self) -> String { "overshoot".into() }
///     fn mode(&self) -> Mode { Mode::Min }
///     fn update(&mut self, prediction: &DynTensor, target: &DynTensor) -> rumus::Result<()> {
///         let (p, t) = (prediction.try_to_f64_vec()?, target.try_to_f64_vec()?);
///         self.above += p.iter().zip(&t).filter(|(p, t)| p > t).count();
///         self.seen += p.len();
///         Ok(())
///     }
///     fn compute(&self) -> f64 { self.above as f64 / self.seen as f64 }
///     fn reset(&mut self) { *self = Overshoot::default(); }
///     fn fresh(&self) -> Box<dyn Metric> { Box::new(Overshoot::default()) }
/// }
///
/// let mut metric = Overshoot::default();
/// let p = DynTensor::from_vec(vec![1.0f32, 3.0], &[2])?;
/// let t = DynTensor::from_vec(vec![2.0f32, 2.0], &[2])?;
/// metric.update(&p, &t)?;
/// assert_eq!(metric.compute(), 0.5);
/// # Ok::<(), rumus::Error>(())
/// ```
pub trait Metric: Send {
    /// Its name in the logs, without the phase: `accuracy`, `top5_accuracy`, `f1`, `mae`.
    /// Letters, digits and `_` only, as it becomes a CSV column and a TensorBoard tag.
    fn name(&self) -> String;

    /// Whether it should fall (errors, perplexity) or rise (accuracies): what early
    /// stopping, best-checkpoint keeping and a monitored scheduler follow.
    fn mode(&self) -> Mode;

    /// Takes one batch: the model's output and the target, as the step returned them in its
    /// [`StepOutput`](super::StepOutput). An error names the metric and what it expected.
    fn update(&mut self, prediction: &DynTensor, target: &DynTensor) -> Result<()>;

    /// The value over every batch since the last [`Metric::reset`]; NaN before any batch.
    fn compute(&self) -> f64;

    /// Forgets every batch (the trainer resets before each epoch's training and
    /// evaluation).
    fn reset(&mut self);

    /// A new metric of the same kind and settings with no batches seen (the trainer keeps
    /// one for training and one for evaluation).
    fn fresh(&self) -> Box<dyn Metric>;
}

/// Reads `prediction` `[N, C]` (scores of `C` classes) and `target` `[N]` (class indices, any
/// dtype holding whole numbers) to the host: the scores row by row, and the labels checked to
/// lie in `0..C`. `metric` names the caller in errors.
pub(super) fn scores_and_labels(
    metric: &'static str,
    prediction: &DynTensor,
    target: &DynTensor,
) -> Result<(Vec<f64>, Vec<usize>, usize)> {
    let (p, t) = (prediction.dims(), target.dims());
    let classes = match (p, t) {
        ([n, c], [m]) if n == m && *c > 0 => *c,
        _ => {
            return Err(Error::InvalidArgument {
                op: metric,
                message: format!(
                    "takes scores [N, C] and class indices [N]; got prediction {p:?} and \
                     target {t:?}. For a sequence model flatten both first \
                     (`logits.reshape(&[-1, C])`, `labels.reshape(&[-1])`)"
                ),
            });
        }
    };
    let scores = prediction.try_to_f64_vec()?;
    let labels = target
        .try_to_f64_vec()?
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            if l >= 0.0 && l.fract() == 0.0 && (l as usize) < classes {
                Ok(l as usize)
            } else {
                Err(Error::InvalidArgument {
                    op: metric,
                    message: format!(
                        "target {i} is {l}, not a class index in 0..{classes} (the prediction \
                         has {classes} columns)"
                    ),
                })
            }
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((scores, labels, classes))
}
