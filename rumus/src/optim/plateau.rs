//! Cutting the learning rate when a metric stops improving: PyTorch's
//! `torch.optim.lr_scheduler.ReduceLROnPlateau`, step for step. Unlike the closed-form
//! schedules, its rate depends on the history of the metric, so a checkpoint stores its
//! counters (see [`Scheduler::state`]).

use std::collections::BTreeMap;

use super::limits;
use super::optimizer::Optimizer;
use super::scheduler::Scheduler;
use crate::error::{Error, Result};

/// Whether smaller or larger values of a metric are better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Smaller is better (a loss).
    Min,
    /// Larger is better (an accuracy).
    Max,
}

impl Mode {
    /// The starting best of a search for the best value: every number improves on it
    /// (infinity for `Min`, minus infinity for `Max`).
    pub fn worst(self) -> f64 {
        match self {
            Mode::Min => f64::INFINITY,
            Mode::Max => f64::NEG_INFINITY,
        }
    }
}

/// How [`PlateauConfig::threshold`] is measured (PyTorch's `threshold_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThresholdMode {
    /// Relative: a new best must beat `best * (1 - threshold)` (mode min) or
    /// `best * (1 + threshold)` (mode max).
    Rel,
    /// Absolute: a new best must beat `best - threshold` (min) or `best + threshold` (max).
    Abs,
}

/// Settings of [`ReduceLrOnPlateau`]; [`PlateauConfig::min`] and [`PlateauConfig::max`] give
/// PyTorch's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlateauConfig {
    /// Whether the metric should fall or rise.
    pub mode: Mode,
    /// Each cut multiplies the rate by this; in `[0, 1)`.
    pub factor: f64,
    /// Epochs without improvement tolerated; the rate is cut on the next one.
    pub patience: u64,
    /// How much better than the best a value must be to count as an improvement.
    pub threshold: f64,
    /// Whether `threshold` is relative or absolute.
    pub threshold_mode: ThresholdMode,
    /// Epochs after a cut during which bad epochs are not counted.
    pub cooldown: u64,
    /// No cut takes a group's rate below this.
    pub min_lr: f64,
    /// Cuts smaller than this are skipped.
    pub eps: f64,
}

impl PlateauConfig {
    /// For a metric that should fall: factor 0.1, patience 10, relative threshold 1e-4, no
    /// cooldown, no floor, eps 1e-8 (PyTorch's defaults).
    pub fn min() -> Self {
        PlateauConfig {
            mode: Mode::Min,
            factor: 0.1,
            patience: 10,
            threshold: 1e-4,
            threshold_mode: ThresholdMode::Rel,
            cooldown: 0,
            min_lr: 0.0,
            eps: 1e-8,
        }
    }

    /// [`PlateauConfig::min`] for a metric that should rise.
    pub fn max() -> Self {
        PlateauConfig {
            mode: Mode::Max,
            ..PlateauConfig::min()
        }
    }
}

/// Multiplies every group's rate by `factor` once the metric has not improved for more than
/// `patience` epochs, as PyTorch's `ReduceLROnPlateau`; call [`ReduceLrOnPlateau::step`]
/// with the metric after each epoch (a [`Trainer`](crate::train::Trainer) does, through
/// [`Scheduler::step_epoch`]).
#[derive(Debug, Clone)]
pub struct ReduceLrOnPlateau {
    config: PlateauConfig,
    best: f64,
    num_bad_epochs: u64,
    cooldown_counter: u64,
    last_epoch: u64,
}

const KEY_BEST: &str = "best";
const KEY_BAD: &str = "num_bad_epochs";
const KEY_COOLDOWN: &str = "cooldown_counter";

impl ReduceLrOnPlateau {
    /// A scheduler with no history. Refuses a `factor` outside `[0, 1)` (PyTorch refuses
    /// `factor >= 1`), and a negative or non-finite threshold, `min_lr` or `eps`.
    pub fn new(config: PlateauConfig) -> Result<Self> {
        limits::settings(
            "ReduceLrOnPlateau",
            [
                limits::fraction("factor", config.factor),
                limits::non_negative("threshold", config.threshold),
                limits::non_negative("min_lr", config.min_lr),
                limits::non_negative("eps", config.eps),
            ],
        )?;
        Ok(ReduceLrOnPlateau {
            config,
            best: config.mode.worst(),
            num_bad_epochs: 0,
            cooldown_counter: 0,
            last_epoch: 0,
        })
    }

    /// The settings.
    pub fn config(&self) -> &PlateauConfig {
        &self.config
    }

    /// The best metric seen so far (infinite before the first step).
    pub fn best(&self) -> f64 {
        self.best
    }

    /// Epochs since the last improvement, as counted towards `patience`.
    pub fn num_bad_epochs(&self) -> u64 {
        self.num_bad_epochs
    }

    /// Ends an epoch whose metric was `metric` and cuts the rates if the plateau has lasted
    /// long enough. A NaN never improves on the best (every comparison with it is false), so
    /// it counts as a bad epoch, as in PyTorch.
    pub fn step(&mut self, optimizer: &mut dyn Optimizer, metric: f64) {
        self.last_epoch += 1;
        if self.is_better(metric) {
            self.best = metric;
            self.num_bad_epochs = 0;
        } else {
            self.num_bad_epochs += 1;
        }
        if self.cooldown_counter > 0 {
            self.cooldown_counter -= 1;
            self.num_bad_epochs = 0;
        }
        if self.num_bad_epochs > self.config.patience {
            self.reduce(optimizer);
            self.cooldown_counter = self.config.cooldown;
            self.num_bad_epochs = 0;
        }
    }

    fn is_better(&self, metric: f64) -> bool {
        let PlateauConfig {
            mode,
            threshold,
            threshold_mode,
            ..
        } = self.config;
        match (mode, threshold_mode) {
            (Mode::Min, ThresholdMode::Rel) => metric < self.best * (1.0 - threshold),
            (Mode::Min, ThresholdMode::Abs) => metric < self.best - threshold,
            (Mode::Max, ThresholdMode::Rel) => metric > self.best * (threshold + 1.0),
            (Mode::Max, ThresholdMode::Abs) => metric > self.best + threshold,
        }
    }

    /// `lr * factor`, floored at `min_lr`, for every group whose rate falls by more than
    /// `eps`.
    fn reduce(&self, optimizer: &mut dyn Optimizer) {
        let lrs: Vec<f64> = optimizer
            .lrs()
            .into_iter()
            .map(|old| {
                let new = (old * self.config.factor).max(self.config.min_lr);
                if old - new > self.config.eps {
                    new
                } else {
                    old
                }
            })
            .collect();
        optimizer.set_lrs(&lrs);
    }
}

impl Scheduler for ReduceLrOnPlateau {
    fn step_epoch(&mut self, optimizer: &mut dyn Optimizer, metric: f64) {
        self.step(optimizer, metric);
    }

    fn epoch(&self) -> u64 {
        self.last_epoch
    }

    /// The best value (exact: Rust prints the shortest text that parses back to the same
    /// `f64`), the bad-epoch count and the cooldown counter.
    fn state(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (KEY_BEST.to_string(), format!("{:e}", self.best)),
            (KEY_BAD.to_string(), self.num_bad_epochs.to_string()),
            (KEY_COOLDOWN.to_string(), self.cooldown_counter.to_string()),
        ])
    }

    fn restore(
        &mut self,
        _optimizer: &mut dyn Optimizer,
        epoch: u64,
        state: &BTreeMap<String, String>,
    ) -> Result<()> {
        let refuse = |message: String| Error::InvalidArgument {
            op: "ReduceLrOnPlateau::restore",
            message: format!("{message}; was the state saved by another kind of scheduler?"),
        };
        let field = |key: &str| {
            state
                .get(key)
                .map(String::as_str)
                .ok_or_else(|| refuse(format!("the saved state has no `{key}` field")))
        };
        let whole = |key: &str| -> Result<u64> {
            let text = field(key)?;
            let value = text
                .parse::<u64>()
                .map_err(|_| refuse(format!("`{key}` is `{text}`, not a whole number")))?;
            limits::count(&format!("`{key}`"), value).map_err(&refuse)?;
            Ok(value)
        };
        let text = field(KEY_BEST)?;
        let best = text
            .parse::<f64>()
            .map_err(|_| refuse(format!("`{KEY_BEST}` is `{text}`, not a number")))?;
        if best.is_nan() {
            return Err(refuse(format!(
                "`{KEY_BEST}` is NaN, which never improves on anything and so is never the best"
            )));
        }
        let (bad, cooldown) = (whole(KEY_BAD)?, whole(KEY_COOLDOWN)?);
        limits::count("the epoch", epoch).map_err(&refuse)?;
        self.best = best;
        self.num_bad_epochs = bad;
        self.cooldown_counter = cooldown;
        self.last_epoch = epoch;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::{Sgd, SgdConfig};
    use crate::tensor::DynTensor;

    fn sgd(lr: f64) -> Sgd {
        let p = DynTensor::from_vec(vec![0.0f32], &[1])
            .unwrap()
            .requires_grad_()
            .unwrap();
        Sgd::new(
            vec![p],
            SgdConfig {
                lr,
                ..SgdConfig::default()
            },
        )
        .unwrap()
    }

    /// The rate after each of `metrics`.
    fn lrs_after(config: PlateauConfig, lr: f64, metrics: &[f64]) -> Vec<f64> {
        let mut optimizer = sgd(lr);
        let mut scheduler = ReduceLrOnPlateau::new(config).unwrap();
        metrics
            .iter()
            .map(|&m| {
                scheduler.step(&mut optimizer, m);
                optimizer.lrs()[0]
            })
            .collect()
    }

    /// Traced by hand through PyTorch's `ReduceLROnPlateau.step` (torch 2.x):
    /// `is_better(a, best)` is `a < best * (1 - threshold)` for mode min, rel; on
    /// improvement `best = a, num_bad_epochs = 0`, else `num_bad_epochs += 1`; then, if
    /// `cooldown_counter > 0`: `cooldown_counter -= 1; num_bad_epochs = 0`; then, if
    /// `num_bad_epochs > patience`: `lr = max(lr * factor, min_lr)` unless that changes it by
    /// at most eps, `cooldown_counter = cooldown, num_bad_epochs = 0`.
    ///
    /// factor 0.5, patience 2, threshold 0.1 (rel), cooldown 1, min_lr 0.02, lr 0.1:
    /// - e1 1.0: better than inf, best 1.0.
    /// - e2 0.95, e3 0.91: not below 0.9 (the relative threshold), bad 1, 2.
    /// - e4 0.92: bad 3 > 2: lr 0.05, cooldown 1, bad 0.
    /// - e5 0.5: best 0.5; cooldown 1 -> 0, bad 0.
    /// - e6, e7 0.6: bad 1, 2; e8: bad 3: lr 0.025, cooldown 1.
    /// - e9: bad 1, zeroed by the cooldown (-> 0); e10, e11: bad 1, 2; e12: bad 3:
    ///   0.0125 floored at 0.02 (a cut of 0.005 > eps): lr 0.02, cooldown 1.
    /// - e13: cooldown; e14, e15: bad 1, 2; e16: bad 3: max(0.01, 0.02) = 0.02 is no cut
    ///   (0 <= eps): lr stays 0.02.
    #[test]
    fn follows_pytorch_in_mode_min_with_cooldown_and_floor() {
        let config = PlateauConfig {
            factor: 0.5,
            patience: 2,
            threshold: 0.1,
            cooldown: 1,
            min_lr: 0.02,
            ..PlateauConfig::min()
        };
        let metrics = [
            1.0, 0.95, 0.91, 0.92, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6,
        ];
        let expected = [
            0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.025, 0.02, 0.02, 0.02,
            0.02, 0.02,
        ];
        assert_eq!(lrs_after(config, 0.1, &metrics), expected);
    }

    /// Mode max, absolute threshold 0.01, patience 0, factor 0.1, lr 1.0, traced the same
    /// way (`is_better` is `a > best + threshold`):
    /// - e1 0.5: best 0.5. e2 0.505: not above 0.51, bad 1 > 0: lr 1.0 * 0.1.
    /// - e3 0.6: best 0.6. e4 0.6: bad 1: lr 0.1 * 0.1. e5 NaN: never better, bad 1: cut.
    #[test]
    fn follows_pytorch_in_mode_max_with_an_absolute_threshold() {
        let config = PlateauConfig {
            factor: 0.1,
            patience: 0,
            threshold: 0.01,
            threshold_mode: ThresholdMode::Abs,
            ..PlateauConfig::max()
        };
        let lrs = lrs_after(config, 1.0, &[0.5, 0.505, 0.6, 0.6, f64::NAN]);
        assert_eq!(lrs, [1.0, 0.1, 0.1, 0.1 * 0.1, 0.1 * 0.1 * 0.1]);
    }

    #[test]
    fn state_round_trips_and_bad_state_is_refused() {
        let config = PlateauConfig {
            patience: 1,
            cooldown: 2,
            ..PlateauConfig::min()
        };
        let mut optimizer = sgd(1.0);
        let mut a = ReduceLrOnPlateau::new(config).unwrap();
        for m in [0.3, 1.0 / 3.0, 0.4, 0.4] {
            a.step(&mut optimizer, m);
        }
        let mut b = ReduceLrOnPlateau::new(config).unwrap();
        b.restore(&mut optimizer, a.epoch(), &a.state()).unwrap();
        let (mut opt_a, mut opt_b) = (sgd(1.0), sgd(1.0));
        for m in [0.5, 0.2, 0.2, 0.2, 0.2] {
            a.step(&mut opt_a, m);
            b.step(&mut opt_b, m);
            assert_eq!(opt_a.lrs(), opt_b.lrs());
            assert_eq!(a.state(), b.state());
        }
        let mut broken = a.state();
        broken.insert(KEY_BAD.into(), "-1".into());
        let err = b
            .restore(&mut optimizer, 3, &broken)
            .unwrap_err()
            .to_string();
        assert!(err.contains("`num_bad_epochs` is `-1`"), "{err}");
        broken.remove(KEY_BAD);
        let err = b
            .restore(&mut optimizer, 3, &broken)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no `num_bad_epochs` field"), "{err}");
        assert_eq!(b.state(), a.state(), "a refused restore changes nothing");
    }

    #[test]
    fn a_factor_of_one_is_refused() {
        let err = ReduceLrOnPlateau::new(PlateauConfig {
            factor: 1.0,
            ..PlateauConfig::min()
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("factor is 1"), "{err}");
    }
}
