//! Running loss and accuracy over batches.

use crate::error::Result;
use crate::nn::{CrossEntropyOptions, cross_entropy};
use crate::optim::Mode;
use crate::tensor::DynTensor;

/// Sums over the batches of a phase (train or evaluation).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Metrics {
    /// Sum of per-example losses.
    pub loss_sum: f64,
    /// Correct predictions.
    pub correct: usize,
    /// Examples seen.
    pub count: usize,
}

impl Metrics {
    /// One batch: its mean loss, correct predictions and size.
    pub fn batch(mean_loss: f64, correct: usize, count: usize) -> Self {
        Metrics {
            loss_sum: mean_loss * count as f64,
            correct,
            count,
        }
    }

    /// Adds another batch's (or phase's) sums to these.
    pub fn add(&mut self, other: Metrics) {
        self.loss_sum += other.loss_sum;
        self.correct += other.correct;
        self.count += other.count;
    }

    /// Loss per example; 0 when nothing was seen.
    pub fn mean_loss(&self) -> f64 {
        self.loss_sum / self.count.max(1) as f64
    }

    /// Fraction of correct predictions, in `[0, 1]`; 0 when nothing was seen.
    pub fn accuracy(&self) -> f64 {
        self.correct as f64 / self.count.max(1) as f64
    }
}

/// Cross-entropy of `logits` `[N, C]` against `labels` (`i64` `[N]`) and the batch's metrics
/// (mean loss, correct argmax predictions).
pub fn classification(logits: &DynTensor, labels: &DynTensor) -> Result<(DynTensor, Metrics)> {
    let loss = cross_entropy(logits, labels, &CrossEntropyOptions::default())?;
    let correct = logits
        .argmax(1, false)?
        .eq(&labels.to(&logits.device())?)?
        .to_vec::<bool>()?
        .iter()
        .filter(|&&c| c)
        .count();
    let metrics = Metrics::batch(loss.try_to_f64_vec()?[0], correct, labels.numel());
    Ok((loss, metrics))
}

/// The numbers of one epoch.
#[derive(Debug, Clone, Copy)]
pub struct EpochSummary {
    /// The epoch, counted from 1.
    pub epoch: usize,
    /// Sums over the epoch's training batches.
    pub train: Metrics,
    /// What the evaluation after the epoch measured.
    pub eval: Metrics,
    /// The learning rate the epoch trained with (of the first parameter group).
    pub lr: f64,
    /// Wall-clock time of the epoch, training and evaluation, in seconds.
    pub seconds: f64,
}

/// `epoch   3  train_loss=..  train_accuracy=..  eval_loss=..  eval_accuracy=..  lr=..  (.. s)`:
/// the numbers under the names ([`Metric::name`]) the CSV log, TensorBoard and the curves use,
/// so a console line reads the same as the files.
impl std::fmt::Display for EpochSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "epoch {:>3}", self.epoch)?;
        for metric in Metric::ALL {
            write!(f, "  {}={:.4}", metric.name(), metric.of(self))?;
        }
        write!(f, "  lr={:.3e}  ({:.1} s)", self.lr, self.seconds)
    }
}

/// A number of an [`EpochSummary`] that early stopping or a
/// [`ReduceLrOnPlateau`](crate::optim::ReduceLrOnPlateau) watches (Lightning's `monitor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Mean loss over the epoch's training batches.
    TrainLoss,
    /// Accuracy over the epoch's training batches.
    TrainAccuracy,
    /// Mean loss of the evaluation after the epoch.
    EvalLoss,
    /// Accuracy of the evaluation after the epoch.
    EvalAccuracy,
}

impl Metric {
    /// Every metric, in the order of the CSV log's columns.
    pub const ALL: [Metric; 4] = [
        Metric::TrainLoss,
        Metric::TrainAccuracy,
        Metric::EvalLoss,
        Metric::EvalAccuracy,
    ];

    /// Its value in `summary`.
    pub fn of(self, summary: &EpochSummary) -> f64 {
        match self {
            Metric::TrainLoss => summary.train.mean_loss(),
            Metric::TrainAccuracy => summary.train.accuracy(),
            Metric::EvalLoss => summary.eval.mean_loss(),
            Metric::EvalAccuracy => summary.eval.accuracy(),
        }
    }

    /// Whether it should fall (losses) or rise (accuracies).
    pub fn mode(self) -> Mode {
        match self {
            Metric::TrainLoss | Metric::EvalLoss => Mode::Min,
            Metric::TrainAccuracy | Metric::EvalAccuracy => Mode::Max,
        }
    }

    /// Its name in the CSV log's header and the console lines (`eval_loss`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Metric::TrainLoss => "train_loss",
            Metric::TrainAccuracy => "train_accuracy",
            Metric::EvalLoss => "eval_loss",
            Metric::EvalAccuracy => "eval_accuracy",
        }
    }
}
