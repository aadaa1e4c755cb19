//! The running numbers of one phase: loss and example sums, and the metrics fed batch by
//! batch.

use super::metric::Metric;
use super::step::StepOutput;
use super::summary::PhaseSummary;
use crate::error::{Error, Result};

/// Sums and metrics of the phase under way.
pub(super) struct PhaseMeter {
    loss_sum: f64,
    count: usize,
    metrics: Vec<Box<dyn Metric>>,
}

impl PhaseMeter {
    /// A meter with fresh copies of `metrics`.
    pub(super) fn new(metrics: &[Box<dyn Metric>]) -> Self {
        PhaseMeter {
            loss_sum: 0.0,
            count: 0,
            metrics: metrics.iter().map(|m| m.fresh()).collect(),
        }
    }

    /// Forgets every batch (a new phase).
    pub(super) fn reset(&mut self) {
        self.loss_sum = 0.0;
        self.count = 0;
        self.metrics.iter_mut().for_each(|m| m.reset());
    }

    /// Starts from the sums of batches trained before a resume (their metrics' state is not
    /// kept).
    pub(super) fn carry(&mut self, loss_sum: f64, count: usize) {
        self.loss_sum += loss_sum;
        self.count += count;
    }

    /// Sum of per-example losses so far.
    pub(super) fn loss_sum(&self) -> f64 {
        self.loss_sum
    }

    /// Examples so far.
    pub(super) fn count(&self) -> usize {
        self.count
    }

    /// Takes one batch; `phase` names the step in errors.
    pub(super) fn add(&mut self, batch: &StepOutput, phase: &str) -> Result<()> {
        self.loss_sum += batch.loss * batch.count as f64;
        self.count += batch.count;
        if self.metrics.is_empty() {
            return Ok(());
        }
        let Some((prediction, target)) = &batch.prediction else {
            let names: Vec<String> = self.metrics.iter().map(|m| m.name()).collect();
            return Err(Error::InvalidArgument {
                op: "Trainer",
                message: format!(
                    "the {phase} step reported its loss only, but the trainer measures {}; \
                     return `StepOutput::new(&loss, &output, &target)` (or `classification`)",
                    names.join(", ")
                ),
            });
        };
        for metric in &mut self.metrics {
            metric.update(prediction, target)?;
        }
        Ok(())
    }

    /// Mean loss so far.
    pub(super) fn mean_loss(&self) -> f64 {
        self.loss_sum / self.count.max(1) as f64
    }

    /// What the phase measured.
    pub(super) fn summary(&self) -> PhaseSummary {
        PhaseSummary {
            loss_sum: self.loss_sum,
            count: self.count,
            values: self
                .metrics
                .iter()
                .map(|m| (m.name(), m.compute()))
                .collect(),
        }
    }
}
