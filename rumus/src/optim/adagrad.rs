//! Adagrad, following PyTorch: per-element step sizes from the sum of squared gradients,
//! with learning-rate decay.

use super::limits;
use super::optimizer::Optimizer;
use super::params::{ParamGroup, Params};
use crate::autograd::GradientStore;
use crate::error::Result;

/// Settings of [`Adagrad`]; the defaults are PyTorch's.
#[derive(Debug, Clone, Copy)]
pub struct AdagradConfig {
    /// Learning rate (used by [`Adagrad::new`]; groups carry their own).
    pub lr: f64,
    /// Step `t` uses `lr / (1 + (t - 1) * lr_decay)`.
    pub lr_decay: f64,
    /// L2 penalty added to the gradient as `weight_decay * p` (used by [`Adagrad::new`]).
    pub weight_decay: f64,
    /// Starting value of every element of the sum of squared gradients.
    pub initial_accumulator_value: f64,
    /// Added to the square root of the sum to keep the division finite.
    pub eps: f64,
}

impl Default for AdagradConfig {
    fn default() -> Self {
        AdagradConfig {
            lr: 0.01,
            lr_decay: 0.0,
            weight_decay: 0.0,
            initial_accumulator_value: 0.0,
            eps: 1e-10,
        }
    }
}

/// Adagrad, as PyTorch's `torch.optim.Adagrad`.
///
/// The first step divides the gradient by the square root of its own square, so every
/// element moves by `lr` against the sign of its gradient:
///
/// ```
/// use rumus::DynTensor;
/// use rumus::optim::{Adagrad, AdagradConfig, Optimizer};
///
/// # fn main() -> rumus::Result<()> {
/// let w = DynTensor::from_vec(vec![1.0f32, -2.0], &[2])?.requires_grad_()?;
/// let config = AdagradConfig { lr: 0.1, ..AdagradConfig::default() };
/// let mut adagrad = Adagrad::new(vec![w.clone()], config)?;
/// let mut grads = w.mul(&w)?.sum_all()?.backward()?; // gradient 2w
/// adagrad.step(&mut grads)?;
/// let w = w.to_vec::<f32>()?;
/// assert!((w[0] - 0.9).abs() < 1e-6 && (w[1] + 1.9).abs() < 1e-6);
/// # Ok(())
/// # }
/// ```
pub struct Adagrad {
    params: Params,
    config: AdagradConfig,
}

impl Adagrad {
    /// One group holding `params`, with the config's `lr` and `weight_decay`. Fails when a
    /// tensor does not require a gradient or a setting is out of range.
    pub fn new(params: Vec<crate::DynTensor>, config: AdagradConfig) -> Result<Self> {
        Self::with_groups(
            vec![ParamGroup::new(params, config.lr).with_weight_decay(config.weight_decay)],
            config,
        )
    }

    /// Several groups, each with its own learning rate and weight decay. `lr_decay`, `eps`
    /// and `initial_accumulator_value` must be `>= 0`, as PyTorch requires (and finite).
    pub fn with_groups(groups: Vec<ParamGroup>, config: AdagradConfig) -> Result<Self> {
        limits::settings(
            "Adagrad",
            [
                limits::non_negative("lr_decay", config.lr_decay),
                limits::non_negative("eps", config.eps),
                limits::non_negative(
                    "initial_accumulator_value",
                    config.initial_accumulator_value,
                ),
            ],
        )?;
        Ok(Adagrad {
            params: Params::new(groups)?,
            config,
        })
    }
}

impl Optimizer for Adagrad {
    fn step(&mut self, grads: &mut GradientStore) -> Result<()> {
        let c = self.config;
        self.params.step(grads, |p, g, state, group| {
            let g = group.l2_gradient(p, g)?;
            let clr = group.lr / (1.0 + (state.step - 1) as f64 * c.lr_decay);
            let sum = state.buffer("sum", || {
                crate::DynTensor::full_on(
                    p.dims(),
                    c.initial_accumulator_value,
                    p.dtype(),
                    &p.device(),
                )
            })?;
            sum.add_scaled_(1.0, &g.mul(&g)?)?;
            p.add_scaled_(-clr, &g.div(&sum.sqrt()?.add_scalar(c.eps)?)?)
        })
    }

    fn params(&self) -> &Params {
        &self.params
    }

    fn params_mut(&mut self) -> &mut Params {
        &mut self.params
    }
}
