//! RMSprop, following PyTorch: a running average of squared gradients (optionally centered)
//! scales each step; optional momentum.

use super::limits;
use super::optimizer::Optimizer;
use super::params::{ParamGroup, Params};
use crate::autograd::GradientStore;
use crate::error::Result;

/// Settings of [`Rmsprop`]; the defaults are PyTorch's.
#[derive(Debug, Clone, Copy)]
pub struct RmspropConfig {
    /// Learning rate (used by [`Rmsprop::new`]; groups carry their own).
    pub lr: f64,
    /// Decay rate of the running average of squared gradients.
    pub alpha: f64,
    /// Added to the square root of the average to keep the division finite.
    pub eps: f64,
    /// L2 penalty added to the gradient as `weight_decay * p` (used by [`Rmsprop::new`]).
    pub weight_decay: f64,
    /// Momentum factor; 0 turns momentum off.
    pub momentum: f64,
    /// Subtract the squared running mean of the gradient from the average (a variance
    /// estimate).
    pub centered: bool,
}

impl Default for RmspropConfig {
    fn default() -> Self {
        RmspropConfig {
            lr: 0.01,
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            centered: false,
        }
    }
}

/// RMSprop, as PyTorch's `torch.optim.RMSprop`.
///
/// The first step divides the gradient by `sqrt((1 - alpha) * g^2)`, so with the default
/// `alpha = 0.99` every element moves by `10 * lr` against the sign of its gradient:
///
/// ```
/// use rumus::DynTensor;
/// use rumus::optim::{Optimizer, Rmsprop, RmspropConfig};
///
/// # fn main() -> rumus::Result<()> {
/// let w = DynTensor::from_vec(vec![1.0f32, -2.0], &[2])?.requires_grad_()?;
/// let mut rmsprop = Rmsprop::new(vec![w.clone()], RmspropConfig::default())?; // lr 0.01
/// let mut grads = w.mul(&w)?.sum_all()?.backward()?; // gradient 2w
/// rmsprop.step(&mut grads)?;
/// let w = w.to_vec::<f32>()?;
/// assert!((w[0] - 0.9).abs() < 1e-6 && (w[1] + 1.9).abs() < 1e-6);
/// # Ok(())
/// # }
/// ```
pub struct Rmsprop {
    params: Params,
    config: RmspropConfig,
}

impl Rmsprop {
    /// One group holding `params`, with the config's `lr` and `weight_decay`. Fails when a
    /// tensor does not require a gradient or a setting is out of range.
    pub fn new(params: Vec<crate::DynTensor>, config: RmspropConfig) -> Result<Self> {
        Self::with_groups(
            vec![ParamGroup::new(params, config.lr).with_weight_decay(config.weight_decay)],
            config,
        )
    }

    /// Several groups, each with its own learning rate and weight decay. `alpha`, `eps` and
    /// the momentum must be `>= 0`, as PyTorch requires (and finite).
    pub fn with_groups(groups: Vec<ParamGroup>, config: RmspropConfig) -> Result<Self> {
        limits::settings(
            "Rmsprop",
            [
                limits::non_negative("alpha", config.alpha),
                limits::non_negative("eps", config.eps),
                limits::non_negative("momentum", config.momentum),
            ],
        )?;
        Ok(Rmsprop {
            params: Params::new(groups)?,
            config,
        })
    }
}

impl Optimizer for Rmsprop {
    fn step(&mut self, grads: &mut GradientStore) -> Result<()> {
        let c = self.config;
        self.params.step(grads, |p, g, state, group| {
            let g = group.l2_gradient(p, g)?;
            let square_avg = state.buffer("square_avg", || p.zeros_like())?;
            square_avg.scale_add_(c.alpha, 1.0 - c.alpha, &g.mul(&g)?)?;
            let avg = if c.centered {
                let grad_avg = state.buffer("grad_avg", || p.zeros_like())?;
                grad_avg.scale_add_(c.alpha, 1.0 - c.alpha, &g)?;
                square_avg
                    .sub(&grad_avg.mul(&grad_avg)?)?
                    .sqrt()?
                    .add_scalar(c.eps)?
            } else {
                square_avg.sqrt()?.add_scalar(c.eps)?
            };
            if c.momentum > 0.0 {
                let buf = state.buffer("momentum_buffer", || p.zeros_like())?;
                buf.scale_add_(c.momentum, 1.0, &g.div(&avg)?)?;
                p.add_scaled_(-group.lr, &buf)
            } else {
                p.add_scaled_(-group.lr, &g.div(&avg)?)
            }
        })
    }

    fn params(&self) -> &Params {
        &self.params
    }

    fn params_mut(&mut self) -> &mut Params {
        &mut self.params
    }
}
