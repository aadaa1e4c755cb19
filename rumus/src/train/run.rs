//! What a [`Trainer`](super::Trainer) trains ([`Run`]: the model, its optimizer, maybe a
//! scheduler) and what its end-of-epoch callback receives ([`EpochEnd`]). The trainer holds
//! the optimizer and the scheduler and lends them to the callbacks, so stepping a scheduler
//! or saving a checkpoint in a callback needs no `RefCell`.

use super::early_stopping::EarlyStopping;
use super::loop_state;
use super::metrics::{EpochSummary, Metric};
use crate::error::Result;
use crate::io::Checkpoint;
use crate::nn::Module;
use crate::optim::{Optimizer, Scheduler};

/// The parts of one training run: the model (read for checkpoints), the optimizer (lent to
/// the step closure each batch) and an optional scheduler, stepped by the trainer after each
/// epoch with the monitored metric (as Lightning's `interval: "epoch"`).
///
/// A scheduler stepped per batch (one-cycle, warm-up) is not given here: the step closure
/// owns it and steps it with the optimizer it is lent.
pub struct Run<'a> {
    pub(super) model: &'a dyn Module,
    pub(super) optimizer: &'a mut dyn Optimizer,
    pub(super) scheduler: Option<&'a mut dyn Scheduler>,
    pub(super) monitor: Metric,
}

impl<'a> Run<'a> {
    /// A run of `model` with `optimizer` and no scheduler.
    pub fn new(model: &'a dyn Module, optimizer: &'a mut dyn Optimizer) -> Self {
        Run {
            model,
            optimizer,
            scheduler: None,
            monitor: Metric::EvalLoss,
        }
    }

    /// Steps `scheduler` after every epoch, with the evaluation loss unless
    /// [`Run::monitor`] says otherwise.
    pub fn scheduler(mut self, scheduler: &'a mut dyn Scheduler) -> Self {
        self.scheduler = Some(scheduler);
        self
    }

    /// The metric the scheduler is stepped with (a
    /// [`ReduceLrOnPlateau`](crate::optim::ReduceLrOnPlateau) in mode `Max` wants
    /// [`Metric::EvalAccuracy`]).
    pub fn monitor(mut self, metric: Metric) -> Self {
        self.monitor = metric;
        self
    }
}

/// What the end-of-epoch callback of [`Trainer::fit`](super::Trainer::fit) gets, after the
/// scheduler has stepped and early stopping has seen the epoch.
pub struct EpochEnd<'r> {
    /// The epoch just finished.
    pub summary: &'r EpochSummary,
    /// Every epoch so far, this one last (a resumed run's earlier epochs included).
    pub history: &'r [EpochSummary],
    /// The model being trained.
    pub model: &'r dyn Module,
    /// The optimizer, with the rates of the next epoch.
    pub optimizer: &'r mut dyn Optimizer,
    /// The scheduler of the [`Run`], if it has one.
    pub scheduler: Option<&'r mut dyn Scheduler>,
    pub(super) early_stopping: Option<&'r EarlyStopping>,
    pub(super) steps: u64,
    pub(super) stop: bool,
}

impl EpochEnd<'_> {
    /// Everything needed to resume after this epoch, with
    /// [`Trainer::resume_from`](super::Trainer::resume_from): model, optimizer, scheduler,
    /// the process-wide generator, early stopping and the history. Save it with
    /// [`Checkpoint::save`]. Fails when a GPU tensor cannot be read back or a copy cannot be
    /// allocated.
    pub fn checkpoint(&self) -> Result<Checkpoint> {
        let scheduler = self.scheduler.as_deref();
        let mut checkpoint = Checkpoint::capture(
            self.model,
            &*self.optimizer,
            scheduler.map(|s| s.epoch()),
            self.summary.epoch as u64,
            self.steps,
        )?;
        checkpoint.loop_state = loop_state::capture(self.history, scheduler, self.early_stopping);
        Ok(checkpoint)
    }

    /// Ends training after this epoch (the history so far is returned).
    pub fn stop(&mut self) {
        self.stop = true;
    }
}
