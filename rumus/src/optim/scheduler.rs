//! Learning-rate schedules. Each computes the rate of every parameter group from the group's
//! initial rate and the number of `step()` calls so far, in closed form, as PyTorch's
//! schedulers do; constructing one sets the epoch-0 rate. [`Scheduler`] is what a training
//! loop needs of any of them, [`ReduceLrOnPlateau`](super::ReduceLrOnPlateau) included.

use std::collections::BTreeMap;

use super::limits::pow_count;
use super::optimizer::Optimizer;
use crate::error::{Error, Result};

/// A rule for the learning rate after `epoch` scheduler steps.
pub trait Schedule {
    /// The rate of a group whose initial rate is `base_lr`, after `epoch` steps.
    fn lr_at(&self, base_lr: f64, epoch: u64) -> f64;
}

/// Drives a [`Schedule`] for one optimizer.
pub struct LrScheduler<S: Schedule> {
    schedule: S,
    base_lrs: Vec<f64>,
    epoch: u64,
}

impl<S: Schedule> LrScheduler<S> {
    /// Takes the optimizer's current rates as the base rates and applies epoch 0.
    pub fn new(optimizer: &mut dyn Optimizer, schedule: S) -> Self {
        let scheduler = LrScheduler {
            schedule,
            base_lrs: optimizer.lrs(),
            epoch: 0,
        };
        optimizer.set_lrs(&scheduler.current());
        scheduler
    }

    fn current(&self) -> Vec<f64> {
        self.base_lrs
            .iter()
            .map(|&base| self.schedule.lr_at(base, self.epoch))
            .collect()
    }

    /// Advances one epoch (or one batch, for per-step schedules) and sets the new rates.
    pub fn step(&mut self, optimizer: &mut dyn Optimizer) {
        self.epoch += 1;
        optimizer.set_lrs(&self.current());
    }

    /// Jumps to `epoch` (as if `step` had been called `epoch` times) and sets the rates for
    /// it. Resuming from a checkpoint needs this: the scheduler is rebuilt from the
    /// optimizer's initial rates, so its position must be restored rather than replayed.
    /// Call it after the optimizer's state is restored, as that overwrites the rates.
    pub fn set_epoch(&mut self, optimizer: &mut dyn Optimizer, epoch: u64) {
        self.epoch = epoch;
        optimizer.set_lrs(&self.current());
    }

    /// The rates set by the last step.
    pub fn last_lrs(&self) -> Vec<f64> {
        self.current()
    }

    /// Number of steps taken (or set with [`LrScheduler::set_epoch`]).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// A learning-rate scheduler stepped once per epoch by a training loop
/// ([`Trainer`](crate::train::Trainer)), whatever rule it follows: a closed-form
/// [`LrScheduler`] ignores the metric, [`ReduceLrOnPlateau`](super::ReduceLrOnPlateau) acts
/// on it. Object safe, so a loop holds any scheduler as `&mut dyn Scheduler`.
pub trait Scheduler {
    /// Ends an epoch whose monitored metric (say, the evaluation loss) was `metric`, and
    /// sets the optimizer's rates for the next one.
    fn step_epoch(&mut self, optimizer: &mut dyn Optimizer, metric: f64);

    /// Number of steps taken (what a checkpoint stores as `scheduler_epoch`).
    fn epoch(&self) -> u64;

    /// State beyond the step count, as text fields that round-trip exactly (a checkpoint
    /// stores them); empty for closed-form schedules.
    fn state(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    /// Restores the position `epoch` and the fields of [`Scheduler::state`]. Call it after
    /// the optimizer's state is restored (closed-form schedules set the rates for `epoch`;
    /// others leave the restored rates alone). A field that is missing or malformed is an
    /// error and changes nothing.
    fn restore(
        &mut self,
        optimizer: &mut dyn Optimizer,
        epoch: u64,
        state: &BTreeMap<String, String>,
    ) -> Result<()>;
}

impl<S: Schedule> Scheduler for LrScheduler<S> {
    fn step_epoch(&mut self, optimizer: &mut dyn Optimizer, _metric: f64) {
        self.step(optimizer);
    }

    fn epoch(&self) -> u64 {
        self.epoch
    }

    fn restore(
        &mut self,
        optimizer: &mut dyn Optimizer,
        epoch: u64,
        _state: &BTreeMap<String, String>,
    ) -> Result<()> {
        self.set_epoch(optimizer, epoch);
        Ok(())
    }
}

/// `lr * gamma^(epoch / step_size)` (PyTorch `StepLR`).
pub struct StepLr {
    /// Steps between decays; 0 counts as 1.
    pub step_size: u64,
    /// Factor applied at each decay.
    pub gamma: f64,
}

impl Schedule for StepLr {
    fn lr_at(&self, base: f64, epoch: u64) -> f64 {
        base * pow_count(self.gamma, epoch / self.step_size.max(1))
    }
}

/// `lr * gamma^epoch` (PyTorch `ExponentialLR`).
pub struct ExponentialLr {
    /// Factor applied at every step.
    pub gamma: f64,
}

impl Schedule for ExponentialLr {
    fn lr_at(&self, base: f64, epoch: u64) -> f64 {
        base * pow_count(self.gamma, epoch)
    }
}

/// Cosine from `lr` down to `eta_min` over `t_max` steps (PyTorch `CosineAnnealingLR`, closed
/// form).
pub struct CosineAnnealingLr {
    /// Steps of the half cosine; 0 counts as 1. Past it the cosine goes on (rises again).
    pub t_max: u64,
    /// The rate reached at `t_max`.
    pub eta_min: f64,
}

impl Schedule for CosineAnnealingLr {
    fn lr_at(&self, base: f64, epoch: u64) -> f64 {
        let progress = epoch as f64 / self.t_max.max(1) as f64;
        self.eta_min + (base - self.eta_min) * (1.0 + (std::f64::consts::PI * progress).cos()) / 2.0
    }
}

/// Linear ramp of the factor from `start_factor` to `end_factor` over `total_iters` steps,
/// then constant (PyTorch `LinearLR`; the usual warm-up).
pub struct LinearWarmup {
    /// Factor of the base rate at step 0.
    pub start_factor: f64,
    /// Factor from `total_iters` on.
    pub end_factor: f64,
    /// Length of the ramp in steps; 0 counts as 1.
    pub total_iters: u64,
}

impl Schedule for LinearWarmup {
    fn lr_at(&self, base: f64, epoch: u64) -> f64 {
        let t = epoch.min(self.total_iters) as f64 / self.total_iters.max(1) as f64;
        base * (self.start_factor + (self.end_factor - self.start_factor) * t)
    }
}

/// The one-cycle policy (PyTorch `OneCycleLR`, two phases, cosine annealing): from
/// `max_lr / div_factor` up to `max_lr` over `pct_start` of `total_steps`, then down to
/// `initial / final_div_factor`. The optimizer's own rate is ignored.
pub struct OneCycleLr {
    /// The peak rate, reached at the end of the warm-up.
    pub max_lr: f64,
    /// Length of the whole cycle in steps, at least 2.
    pub total_steps: u64,
    /// Fraction of `total_steps` spent rising to `max_lr`.
    pub pct_start: f64,
    /// The starting rate is `max_lr / div_factor`.
    pub div_factor: f64,
    /// The final rate is the starting rate divided by this.
    pub final_div_factor: f64,
}

impl OneCycleLr {
    /// PyTorch's defaults: 30% warm-up, start at max/25, end at start/1e4.
    pub fn new(max_lr: f64, total_steps: u64) -> Result<Self> {
        if total_steps < 2 {
            return Err(Error::InvalidArgument {
                op: "OneCycleLr",
                message: format!("needs at least 2 steps, got {total_steps}"),
            });
        }
        Ok(OneCycleLr {
            max_lr,
            total_steps,
            pct_start: 0.3,
            div_factor: 25.0,
            final_div_factor: 1e4,
        })
    }
}

fn cosine_anneal(start: f64, end: f64, pct: f64) -> f64 {
    end + (start - end) / 2.0 * ((std::f64::consts::PI * pct).cos() + 1.0)
}

impl Schedule for OneCycleLr {
    fn lr_at(&self, _base: f64, epoch: u64) -> f64 {
        let initial = self.max_lr / self.div_factor;
        let min = initial / self.final_div_factor;
        let warm_end = self.pct_start * self.total_steps as f64 - 1.0;
        let last = (self.total_steps - 1) as f64;
        let step = epoch as f64;
        if step <= warm_end {
            cosine_anneal(initial, self.max_lr, step / warm_end)
        } else {
            cosine_anneal(self.max_lr, min, (step - warm_end) / (last - warm_end))
        }
    }
}
