//! Regression metrics over a prediction and a target of the same number of elements: mean
//! absolute and mean squared error, over every element of every batch.

use super::Metric;
use crate::error::{Error, Result};
use crate::optim::Mode;
use crate::tensor::DynTensor;

/// The mean of `|prediction - target|` over every element seen. Named `mae`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeanAbsoluteError {
    sum: f64,
    count: usize,
}

/// The mean of `(prediction - target)^2` over every element seen. Named `mse`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MeanSquaredError {
    sum: f64,
    count: usize,
}

/// Adds `error(prediction - target)` of every element to `sum` and their number to `count`.
fn accumulate(
    metric: &'static str,
    prediction: &DynTensor,
    target: &DynTensor,
    error: fn(f64) -> f64,
    (sum, count): (&mut f64, &mut usize),
) -> Result<()> {
    if prediction.numel() != target.numel() {
        return Err(Error::InvalidArgument {
            op: metric,
            message: format!(
                "the prediction {:?} and the target {:?} differ in size; they must hold one \
                 value per target value",
                prediction.dims(),
                target.dims()
            ),
        });
    }
    let (p, t) = (prediction.try_to_f64_vec()?, target.try_to_f64_vec()?);
    *sum += p.iter().zip(&t).map(|(p, t)| error(p - t)).sum::<f64>();
    *count += p.len();
    Ok(())
}

impl Metric for MeanAbsoluteError {
    fn name(&self) -> String {
        "mae".into()
    }

    fn mode(&self) -> Mode {
        Mode::Min
    }

    fn update(&mut self, prediction: &DynTensor, target: &DynTensor) -> Result<()> {
        let running = (&mut self.sum, &mut self.count);
        accumulate("MeanAbsoluteError", prediction, target, f64::abs, running)
    }

    fn compute(&self) -> f64 {
        self.sum / self.count as f64
    }

    fn reset(&mut self) {
        *self = Self::default();
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(Self::default())
    }
}

impl Metric for MeanSquaredError {
    fn name(&self) -> String {
        "mse".into()
    }

    fn mode(&self) -> Mode {
        Mode::Min
    }

    fn update(&mut self, prediction: &DynTensor, target: &DynTensor) -> Result<()> {
        let running = (&mut self.sum, &mut self.count);
        accumulate("MeanSquaredError", prediction, target, |d| d * d, running)
    }

    fn compute(&self) -> f64 {
        self.sum / self.count as f64
    }

    fn reset(&mut self) {
        *self = Self::default();
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(Self::default())
    }
}
