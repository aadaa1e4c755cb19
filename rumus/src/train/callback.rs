//! Hooks into [`Trainer::fit`](super::Trainer::fit), as Lightning's and Keras' callbacks:
//! after each training batch, after each evaluation, after each epoch. The trainer's own
//! extras are callbacks too: [`EarlyStopping`](super::EarlyStopping),
//! [`SaveCheckpoints`](super::SaveCheckpoints), [`KeepBest`](super::KeepBest) and
//! [`LearningRateLog`](super::LearningRateLog).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::metric::Metric;
use super::monitor::Monitor;
use super::run::EpochEnd;
use super::summary::PhaseSummary;
use crate::error::Result;
use crate::nn::Module;
use crate::optim::{Mode, Optimizer};

/// Something that runs at points of a training run. Every method has a default that does
/// nothing, so a callback writes only the hooks it needs. An error from a hook stops
/// training and is what `fit` returns.
pub trait Callback: Send {
    /// What it is, for its entries in a checkpoint's loop state and in errors.
    fn name(&self) -> String;

    /// Before the first epoch (after a resumed run restored the callback's state): check the
    /// settings against the run, e.g. that a monitored metric exists.
    fn on_fit_start(&mut self, _start: &FitStart<'_>) -> Result<()> {
        Ok(())
    }

    /// After each training batch (the step has run and the optimizer was lent to it).
    fn on_train_batch_end(&mut self, _end: &mut BatchEnd<'_>) -> Result<()> {
        Ok(())
    }

    /// After the evaluation of epoch `epoch`.
    fn on_validation_end(&mut self, _epoch: usize, _eval: &PhaseSummary) -> Result<()> {
        Ok(())
    }

    /// After each epoch: the scheduler has stepped and the logs have the epoch's row.
    fn on_epoch_end(&mut self, _end: &mut EpochEnd<'_>) -> Result<()> {
        Ok(())
    }

    /// The state a resumed run needs (best value so far, ...), as exact text. Kept in every
    /// checkpoint the trainer writes.
    fn state(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    /// Puts back [`Callback::state`] from the checkpoint named `source`.
    fn restore(&mut self, _state: &BTreeMap<String, String>, _source: &str) -> Result<()> {
        Ok(())
    }
}

/// What [`Callback::on_fit_start`] gets to check its settings against.
pub struct FitStart<'r> {
    /// The trainer's metrics.
    pub metrics: &'r [Box<dyn Metric>],
    /// The last epoch of the run.
    pub epochs: usize,
    /// Whether the run resumes from a checkpoint (whose callback states were just restored);
    /// a fresh run's callbacks start from scratch.
    pub resumed: bool,
}

impl FitStart<'_> {
    /// Whether `monitor` should fall or rise; an error when the trainer does not measure it.
    pub fn mode(&self, monitor: &Monitor) -> Result<Mode> {
        monitor.mode(self.metrics)
    }
}

/// What [`Callback::on_train_batch_end`] gets.
pub struct BatchEnd<'r> {
    /// The epoch under way, from 1.
    pub epoch: usize,
    /// The batch just trained, from 1 within the epoch.
    pub batch: usize,
    /// Batches trained since the run began (a resumed run's earlier ones included).
    pub steps: u64,
    /// The batch's mean loss.
    pub loss: f64,
    /// The model being trained.
    pub model: &'r dyn Module,
    /// The optimizer (its learning rates are the next batch's).
    pub optimizer: &'r dyn Optimizer,
    pub(super) save_to: Vec<PathBuf>,
    pub(super) stop: bool,
}

impl BatchEnd<'_> {
    /// Saves a checkpoint to `path` once every callback has run (atomically, as
    /// [`Checkpoint::save`](crate::io::Checkpoint::save)). A run resumed from it skips the
    /// batches of this epoch already trained; under gradient accumulation the save waits for
    /// the next optimizer step, so no accumulated gradient is lost.
    pub fn save_checkpoint(&mut self, path: impl Into<PathBuf>) {
        self.save_to.push(path.into());
    }

    /// Ends the epoch's training after this batch; the evaluation still runs and the epoch
    /// is recorded, then training stops.
    pub fn stop(&mut self) {
        self.stop = true;
    }
}
