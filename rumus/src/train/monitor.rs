//! Which number of an epoch a rule watches (Lightning's `monitor`, Keras' `monitor`):
//! early stopping, best-checkpoint keeping and a plateau scheduler.

use std::borrow::Cow;

use super::metric::Metric;
use super::summary::EpochSummary;
use crate::error::{Error, Result};
use crate::optim::Mode;

/// The phase a monitored number comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The epoch's training batches.
    Train,
    /// The evaluation after the epoch.
    Eval,
}

/// A number of an [`EpochSummary`]: the loss or a metric, of training or of evaluation.
/// Its log name is `<phase>_<metric>`: `eval_loss`, `train_accuracy`, `eval_f1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Monitor {
    phase: Phase,
    metric: Cow<'static, str>,
}

impl Monitor {
    /// Mean loss over the epoch's training batches.
    pub const TRAIN_LOSS: Monitor = Monitor::constant(Phase::Train, "loss");
    /// Mean loss of the evaluation after the epoch.
    pub const EVAL_LOSS: Monitor = Monitor::constant(Phase::Eval, "loss");
    /// [`Accuracy`](super::Accuracy) over the epoch's training batches.
    pub const TRAIN_ACCURACY: Monitor = Monitor::constant(Phase::Train, "accuracy");
    /// [`Accuracy`](super::Accuracy) of the evaluation after the epoch.
    pub const EVAL_ACCURACY: Monitor = Monitor::constant(Phase::Eval, "accuracy");

    const fn constant(phase: Phase, metric: &'static str) -> Monitor {
        Monitor {
            phase,
            metric: Cow::Borrowed(metric),
        }
    }

    /// The training value of `metric` (a [`Metric::name`], or `loss`).
    pub fn train(metric: impl Into<Cow<'static, str>>) -> Monitor {
        Monitor {
            phase: Phase::Train,
            metric: metric.into(),
        }
    }

    /// The evaluation value of `metric` (a [`Metric::name`], or `loss`).
    pub fn eval(metric: impl Into<Cow<'static, str>>) -> Monitor {
        Monitor {
            phase: Phase::Eval,
            metric: metric.into(),
        }
    }

    /// Its log name: `eval_loss`, `train_accuracy`, ...
    pub fn name(&self) -> String {
        let phase = match self.phase {
            Phase::Train => "train",
            Phase::Eval => "eval",
        };
        format!("{phase}_{}", self.metric)
    }

    /// Its value in `summary`, if the summary has that metric.
    pub fn of(&self, summary: &EpochSummary) -> Option<f64> {
        match self.phase {
            Phase::Train => summary.train.get(&self.metric),
            Phase::Eval => summary.eval.get(&self.metric),
        }
    }

    /// Whether it should fall or rise: a loss falls; a metric says ([`Metric::mode`]). An
    /// error when `metrics` (the trainer's) has none of that name.
    pub fn mode(&self, metrics: &[Box<dyn Metric>]) -> Result<Mode> {
        if self.metric == "loss" {
            return Ok(Mode::Min);
        }
        if let Some(metric) = metrics.iter().find(|m| m.name() == self.metric) {
            return Ok(metric.mode());
        }
        let names: Vec<String> = std::iter::once("loss".to_string())
            .chain(metrics.iter().map(|m| m.name()))
            .collect();
        Err(Error::InvalidArgument {
            op: "Trainer",
            message: format!(
                "`{}` is monitored, but the trainer measures no `{}`: its metrics are {}; add \
                 the metric with `Trainer::metric(..)` or monitor one of these",
                self.name(),
                self.metric,
                names.join(", ")
            ),
        })
    }
}
