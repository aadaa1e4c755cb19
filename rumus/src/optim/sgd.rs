//! Stochastic gradient descent with momentum, dampening, Nesterov momentum and weight decay,
//! following PyTorch's `torch.optim.SGD` update exactly.

use super::limits;
use super::optimizer::Optimizer;
use super::params::{ParamGroup, Params};
use crate::autograd::GradientStore;
use crate::error::{Error, Result};

/// Settings of [`Sgd`]; the defaults are PyTorch's, with `lr` 0.01.
#[derive(Debug, Clone, Copy)]
pub struct SgdConfig {
    /// Learning rate (used by [`Sgd::new`]; groups carry their own).
    pub lr: f64,
    /// Momentum factor; 0 turns momentum off.
    pub momentum: f64,
    /// Dampening of the gradient's share of the momentum buffer.
    pub dampening: f64,
    /// L2 penalty added to the gradient as `weight_decay * p` (used by [`Sgd::new`]).
    pub weight_decay: f64,
    /// Nesterov momentum; needs `momentum > 0` and `dampening == 0`.
    pub nesterov: bool,
}

impl Default for SgdConfig {
    fn default() -> Self {
        SgdConfig {
            lr: 0.01,
            momentum: 0.0,
            dampening: 0.0,
            weight_decay: 0.0,
            nesterov: false,
        }
    }
}

/// Stochastic gradient descent, as PyTorch's `torch.optim.SGD`.
///
/// ```
/// use rumus::DynTensor;
/// use rumus::optim::{Optimizer, Sgd, SgdConfig};
///
/// # fn main() -> rumus::Result<()> {
/// let w = DynTensor::from_vec(vec![1.0f32, -2.0], &[2])?.requires_grad_()?;
/// let config = SgdConfig { lr: 0.25, ..SgdConfig::default() };
/// let mut sgd = Sgd::new(vec![w.clone()], config)?;
/// let mut grads = w.mul(&w)?.sum_all()?.backward()?; // d/dw sum(w^2) = 2w
/// sgd.step(&mut grads)?; // w - 0.25 * 2w = w / 2, in place
/// assert_eq!(w.to_vec::<f32>()?, vec![0.5, -1.0]);
/// # Ok(())
/// # }
/// ```
pub struct Sgd {
    params: Params,
    config: SgdConfig,
}

impl Sgd {
    /// One group holding `params`, with the config's `lr` and `weight_decay`. Fails when a
    /// tensor does not require a gradient or a setting is out of range.
    pub fn new(params: Vec<crate::DynTensor>, config: SgdConfig) -> Result<Self> {
        Self::with_groups(
            vec![ParamGroup::new(params, config.lr).with_weight_decay(config.weight_decay)],
            config,
        )
    }

    /// Several groups, each with its own learning rate and weight decay. The momentum must be
    /// `>= 0`, as PyTorch requires (and finite, like the dampening).
    pub fn with_groups(groups: Vec<ParamGroup>, config: SgdConfig) -> Result<Self> {
        limits::settings(
            "Sgd",
            [
                limits::non_negative("momentum", config.momentum),
                limits::finite("dampening", config.dampening),
            ],
        )?;
        if config.nesterov && (config.momentum <= 0.0 || config.dampening != 0.0) {
            return Err(Error::InvalidArgument {
                op: "Sgd",
                message: "Nesterov momentum needs momentum > 0 and dampening = 0".into(),
            });
        }
        Ok(Sgd {
            params: Params::new(groups)?,
            config,
        })
    }
}

impl Optimizer for Sgd {
    fn step(&mut self, grads: &mut GradientStore) -> Result<()> {
        let c = self.config;
        self.params.step(grads, |p, g, state, group| {
            let mut g = group.l2_gradient(p, g)?;
            if c.momentum != 0.0 {
                let first = state.step == 1;
                let buf = state.buffer("momentum_buffer", || p.zeros_like())?;
                if first {
                    buf.copy_(&g)?;
                } else {
                    buf.scale_add_(c.momentum, 1.0 - c.dampening, &g)?;
                }
                g = if c.nesterov {
                    g.add(&buf.mul_scalar(c.momentum)?)?
                } else {
                    buf
                };
            }
            p.add_scaled_(-group.lr, &g)
        })
    }

    fn params(&self) -> &Params {
        &self.params
    }

    fn params_mut(&mut self) -> &mut Params {
        &mut self.params
    }
}
