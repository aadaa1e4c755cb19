//! Stopping a run once a monitored value stops improving, as PyTorch Lightning's
//! `EarlyStopping` callback: `patience` epochs in a row without an improvement of more than
//! `min_delta`, or a value that is no longer finite, end training after the epoch. The
//! history so far is kept.

use std::collections::BTreeMap;

use super::callback::{Callback, FitStart};
use super::monitor::Monitor;
use super::run::EpochEnd;
use super::summary::EpochSummary;
use crate::error::{Error, Result};
use crate::optim::Mode;

const KEY_BEST: &str = "best";
const KEY_WAIT: &str = "wait";

/// Watches one value and says when to stop: a [`Callback`]. Give it to
/// [`Trainer::early_stopping`](super::Trainer::early_stopping) or
/// [`Trainer::callback`](super::Trainer::callback).
#[derive(Debug, Clone, PartialEq)]
pub struct EarlyStopping {
    /// The value watched; whether it should fall or rise is the metric's
    /// ([`Monitor::mode`]), known once training starts.
    pub monitor: Monitor,
    /// Epochs in a row without improvement before stopping (Lightning's default: 3).
    pub patience: u64,
    /// An improvement must beat the best by more than this (finite, `>= 0`).
    pub min_delta: f64,
    mode: Mode,
    best: f64,
    wait: u64,
}

impl EarlyStopping {
    /// Watches `monitor` with patience 3 and no minimum improvement (Lightning's defaults).
    pub fn new(monitor: Monitor) -> Self {
        EarlyStopping {
            monitor,
            patience: 3,
            min_delta: 0.0,
            mode: Mode::Min,
            best: f64::NAN,
            wait: 0,
        }
    }

    /// Sets the patience.
    pub fn patience(mut self, epochs: u64) -> Self {
        self.patience = epochs;
        self
    }

    /// Sets the minimum improvement.
    pub fn min_delta(mut self, delta: f64) -> Self {
        self.min_delta = delta;
        self
    }

    /// The best value seen so far (infinite before the first epoch, NaN before training).
    pub fn best(&self) -> f64 {
        self.best
    }

    /// Epochs since the last improvement.
    pub fn wait(&self) -> u64 {
        self.wait
    }

    /// Refuses a `min_delta` that is negative or not finite.
    fn check(&self) -> Result<()> {
        if self.min_delta.is_finite() && self.min_delta >= 0.0 {
            return Ok(());
        }
        Err(Error::InvalidArgument {
            op: "EarlyStopping",
            message: format!(
                "min_delta is {}; it must be a finite number >= 0 (how much better than the \
                 best a value must be to count as an improvement)",
                self.min_delta
            ),
        })
    }

    /// Takes an epoch's summary; returns why training should stop, or `None` to go on.
    fn update(&mut self, summary: &EpochSummary) -> Option<String> {
        let value = self.monitor.of(summary).unwrap_or(f64::NAN);
        let name = self.monitor.name();
        if !value.is_finite() {
            return Some(format!(
                "{name} is {value} at epoch {}, which is not finite",
                summary.epoch
            ));
        }
        let improved = match self.mode {
            Mode::Min => value < self.best - self.min_delta,
            Mode::Max => value > self.best + self.min_delta,
        };
        if improved {
            self.best = value;
            self.wait = 0;
            return None;
        }
        self.wait += 1;
        (self.wait >= self.patience).then(|| {
            format!(
                "{name} did not improve on its best {} by more than {} for {} epochs",
                self.best, self.min_delta, self.wait
            )
        })
    }
}

impl Callback for EarlyStopping {
    fn name(&self) -> String {
        format!("early_stopping({})", self.monitor.name())
    }

    /// Checks `min_delta`, learns whether the monitored value should fall or rise, and
    /// starts a fresh run from no best (a second `fit` of the same trainer included).
    fn on_fit_start(&mut self, start: &FitStart<'_>) -> Result<()> {
        self.check()?;
        self.mode = start.mode(&self.monitor)?;
        if !start.resumed {
            self.best = self.mode.worst();
            self.wait = 0;
        }
        Ok(())
    }

    fn on_epoch_end(&mut self, end: &mut EpochEnd<'_>) -> Result<()> {
        if let Some(reason) = self.update(end.summary) {
            end.stop_because(reason);
        }
        Ok(())
    }

    /// The best value and the wait count, as exact text.
    fn state(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (KEY_BEST.to_string(), format!("{:e}", self.best)),
            (KEY_WAIT.to_string(), self.wait.to_string()),
        ])
    }

    fn restore(&mut self, state: &BTreeMap<String, String>, source: &str) -> Result<()> {
        let bad = |key: &str| Error::InvalidArgument {
            op: "Trainer::resume_from",
            message: format!(
                "{source}: the early-stopping field `{key}` is missing or malformed ({:?}); was \
                 the checkpoint written by a run with early stopping?",
                state.get(key)
            ),
        };
        let best = state
            .get(KEY_BEST)
            .and_then(|t| t.parse::<f64>().ok())
            .filter(|b| !b.is_nan())
            .ok_or_else(|| bad(KEY_BEST))?;
        let wait = state
            .get(KEY_WAIT)
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or_else(|| bad(KEY_WAIT))?;
        self.best = best;
        self.wait = wait;
        Ok(())
    }
}
