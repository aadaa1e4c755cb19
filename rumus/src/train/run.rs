//! What a [`Trainer`](super::Trainer) trains ([`Run`]: the model, its optimizer, maybe a
//! scheduler) and what the end-of-epoch hooks receive ([`EpochEnd`]). The trainer holds
//! the optimizer and the scheduler and lends them to the hooks, so stepping a scheduler
//! or saving a checkpoint in a hook needs no `RefCell`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::loop_state;
use super::monitor::Monitor;
use super::summary::EpochSummary;
use crate::error::{Error, Result};
use crate::io::Checkpoint;
use crate::nn::Module;
use crate::optim::{Optimizer, Scheduler};

/// The parts of one training run: the model (read for checkpoints), the optimizer (lent to
/// the step closure each batch) and an optional scheduler, stepped by the trainer after each
/// epoch with the monitored value (as Lightning's `interval: "epoch"`).
///
/// A scheduler stepped per batch (one-cycle, warm-up) is not given here: the step closure
/// owns it and steps it with the optimizer it is lent.
pub struct Run<'a> {
    pub(super) model: &'a dyn Module,
    pub(super) optimizer: &'a mut dyn Optimizer,
    pub(super) scheduler: Option<&'a mut dyn Scheduler>,
    pub(super) monitor: Monitor,
}

impl<'a> Run<'a> {
    /// A run of `model` with `optimizer` and no scheduler.
    pub fn new(model: &'a dyn Module, optimizer: &'a mut dyn Optimizer) -> Self {
        Run {
            model,
            optimizer,
            scheduler: None,
            monitor: Monitor::EVAL_LOSS,
        }
    }

    /// Steps `scheduler` after every epoch, with the evaluation loss unless
    /// [`Run::monitor`] says otherwise.
    pub fn scheduler(mut self, scheduler: &'a mut dyn Scheduler) -> Self {
        self.scheduler = Some(scheduler);
        self
    }

    /// The value the scheduler is stepped with (a
    /// [`ReduceLrOnPlateau`](crate::optim::ReduceLrOnPlateau) in mode `Max` wants
    /// [`Monitor::EVAL_ACCURACY`]).
    pub fn monitor(mut self, monitor: Monitor) -> Self {
        self.monitor = monitor;
        self
    }
}

/// What the end-of-epoch hooks of [`Trainer::fit`](super::Trainer::fit) get (its
/// `after_epoch` closure and every [`Callback::on_epoch_end`](super::Callback)), after the
/// scheduler has stepped and the logs have the epoch.
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
    /// The callbacks' states, for [`EpochEnd::checkpoint`]; `None` inside a callback, whose
    /// own state is still changing.
    pub(super) callback_states: Option<BTreeMap<String, String>>,
    pub(super) steps: u64,
    pub(super) stop: Option<String>,
    pub(super) save_to: Vec<PathBuf>,
}

impl EpochEnd<'_> {
    /// Everything needed to resume after this epoch, with
    /// [`Trainer::resume_from`](super::Trainer::resume_from): model, optimizer, scheduler,
    /// the process-wide generator, the callbacks' states (early stopping, ...) and the
    /// history. Save it with [`Checkpoint::save`]. Fails when a GPU tensor cannot be read
    /// back or a copy cannot be allocated; inside a callback, use
    /// [`EpochEnd::save_checkpoint`] instead.
    pub fn checkpoint(&self) -> Result<Checkpoint> {
        let states = self
            .callback_states
            .as_ref()
            .ok_or_else(|| Error::InvalidArgument {
                op: "EpochEnd::checkpoint",
                message: "a callback cannot capture a checkpoint while the callbacks' states are \
                      changing; ask for one with `end.save_checkpoint(path)`, which the trainer \
                      writes once every callback has run"
                    .into(),
            })?;
        let scheduler = self.scheduler.as_deref();
        let mut checkpoint = Checkpoint::capture(
            self.model,
            &*self.optimizer,
            scheduler.map(|s| s.epoch()),
            self.summary.epoch as u64,
            self.steps,
        )?;
        checkpoint.loop_state = loop_state::capture(self.history, scheduler, states, None);
        Ok(checkpoint)
    }

    /// Saves a checkpoint ([`EpochEnd::checkpoint`]) to `path` once every callback and the
    /// `after_epoch` closure have run (atomically: a crash while saving leaves the previous
    /// file).
    pub fn save_checkpoint(&mut self, path: impl Into<PathBuf>) {
        self.save_to.push(path.into());
    }

    /// Ends training after this epoch (the history so far is returned).
    pub fn stop(&mut self) {
        self.stop_because("the callback asked to stop");
    }

    /// [`EpochEnd::stop`], with the reason printed in the trainer's last line.
    pub fn stop_because(&mut self, reason: impl Into<String>) {
        self.stop.get_or_insert(reason.into());
    }

    /// Whether a hook has asked to stop.
    pub fn stopping(&self) -> bool {
        self.stop.is_some()
    }
}
