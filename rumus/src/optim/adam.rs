//! Adam and AdamW (decoupled weight decay), following PyTorch's update: bias-corrected first
//! and second moments, `eps` added after the square root, optional AMSGrad.

use super::optimizer::Optimizer;
use super::params::{ParamGroup, Params};
use crate::autograd::GradientStore;
use crate::error::Result;

#[derive(Debug, Clone, Copy)]
pub struct AdamConfig {
    pub lr: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    pub weight_decay: f64,
    pub amsgrad: bool,
    /// Decoupled weight decay (AdamW): `p *= 1 - lr * weight_decay` instead of adding
    /// `weight_decay * p` to the gradient.
    pub decoupled: bool,
}

impl AdamConfig {
    /// PyTorch's `Adam` defaults.
    pub fn adam() -> Self {
        AdamConfig {
            lr: 1e-3,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
            decoupled: false,
        }
    }

    /// PyTorch's `AdamW` defaults (weight decay 0.01).
    pub fn adamw() -> Self {
        AdamConfig {
            weight_decay: 0.01,
            decoupled: true,
            ..Self::adam()
        }
    }
}

impl Default for AdamConfig {
    fn default() -> Self {
        Self::adam()
    }
}

pub struct Adam {
    params: Params,
    config: AdamConfig,
}

impl Adam {
    pub fn new(params: Vec<crate::DynTensor>, config: AdamConfig) -> Result<Self> {
        Self::with_groups(
            vec![ParamGroup::new(params, config.lr).with_weight_decay(config.weight_decay)],
            config,
        )
    }

    pub fn with_groups(groups: Vec<ParamGroup>, config: AdamConfig) -> Result<Self> {
        Ok(Adam {
            params: Params::new(groups)?,
            config,
        })
    }
}

impl Optimizer for Adam {
    fn step(&mut self, grads: &mut GradientStore) -> Result<()> {
        let c = self.config;
        let (b1, b2) = c.betas;
        self.params.step(grads, |p, g, state, group| {
            let g = if group.weight_decay != 0.0 && !c.decoupled {
                g.add(&p.mul_scalar(group.weight_decay)?)?
            } else {
                g
            };
            if c.decoupled && group.weight_decay != 0.0 {
                p.mul_scalar_(1.0 - group.lr * group.weight_decay)?;
            }
            let m = state.buffer("exp_avg", || p.zeros_like())?;
            let v = state.buffer("exp_avg_sq", || p.zeros_like())?;
            m.scale_add_(b1, 1.0 - b1, &g)?;
            v.scale_add_(b2, 1.0 - b2, &g.mul(&g)?)?;
            let step = state.step as i32;
            let (correction1, correction2) = (1.0 - b1.powi(step), 1.0 - b2.powi(step));
            let second = if c.amsgrad {
                let max = state.buffer("max_exp_avg_sq", || p.zeros_like())?;
                let larger = crate::DynTensor::where_(&v.gt(&max)?, &v, &max)?;
                max.copy_(&larger)?;
                max
            } else {
                v
            };
            let denom = second
                .sqrt()?
                .mul_scalar(1.0 / correction2.sqrt())?
                .add_scalar(c.eps)?;
            p.add_scaled_(-group.lr / correction1, &m.div(&denom)?)
        })
    }

    fn params(&self) -> &Params {
        &self.params
    }

    fn params_mut(&mut self) -> &mut Params {
        &mut self.params
    }
}
