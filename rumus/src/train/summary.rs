//! The numbers of a run: each phase's mean loss and metric values, an epoch's pair of them.

use super::monitor::Monitor;

/// What one phase (an epoch's training, or the evaluation after it) measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PhaseSummary {
    /// Sum of per-example losses.
    pub loss_sum: f64,
    /// Examples seen.
    pub count: usize,
    /// Each [`Metric`](super::Metric)'s name and value, in the trainer's order.
    pub values: Vec<(String, f64)>,
}

impl PhaseSummary {
    /// Loss per example; 0 when nothing was seen.
    pub fn mean_loss(&self) -> f64 {
        self.loss_sum / self.count.max(1) as f64
    }

    /// The value named `name`: `loss` (the mean loss) or a metric's name.
    pub fn get(&self, name: &str) -> Option<f64> {
        if name == "loss" {
            return Some(self.mean_loss());
        }
        self.values.iter().find(|(n, _)| n == name).map(|&(_, v)| v)
    }

    /// The `accuracy` metric's value; NaN when the trainer had no
    /// [`Accuracy`](super::Accuracy).
    pub fn accuracy(&self) -> f64 {
        self.get("accuracy").unwrap_or(f64::NAN)
    }
}

/// The numbers of one epoch.
#[derive(Debug, Clone, PartialEq)]
pub struct EpochSummary {
    /// The epoch, counted from 1.
    pub epoch: usize,
    /// The epoch's training batches.
    pub train: PhaseSummary,
    /// The evaluation after the epoch.
    pub eval: PhaseSummary,
    /// The learning rate the epoch trained with (of the first parameter group).
    pub lr: f64,
    /// Wall-clock time of the epoch, training and evaluation, in seconds.
    pub seconds: f64,
}

impl EpochSummary {
    /// Every value of the epoch under its log name ([`Monitor::name`]), in the CSV log's
    /// column order: `train_loss`, `train_<metric>`..., `eval_loss`, `eval_<metric>`...
    pub fn named_values(&self) -> Vec<(String, f64)> {
        let mut named = Vec::new();
        for (phase, summary) in [("train", &self.train), ("eval", &self.eval)] {
            named.push((format!("{phase}_loss"), summary.mean_loss()));
            for (name, value) in &summary.values {
                named.push((format!("{phase}_{name}"), *value));
            }
        }
        named
    }

    /// The value `monitor` watches, if the epoch has it.
    pub fn value(&self, monitor: &Monitor) -> Option<f64> {
        monitor.of(self)
    }
}

/// `epoch   3  train_loss=..  train_accuracy=..  eval_loss=..  eval_accuracy=..  lr=..  (.. s)`:
/// the numbers under the names the CSV log, TensorBoard and the curves use, so a console line
/// reads the same as the files.
impl std::fmt::Display for EpochSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "epoch {:>3}", self.epoch)?;
        for (name, value) in self.named_values() {
            write!(f, "  {name}={value:.4}")?;
        }
        write!(f, "  lr={:.3e}  ({:.1} s)", self.lr, self.seconds)
    }
}
