//! Adam and AdamW (decoupled weight decay), following PyTorch's update: bias-corrected first
//! and second moments, `eps` added after the square root, optional AMSGrad.

use super::limits::{self, pow_count};
use super::optimizer::Optimizer;
use super::params::{ParamGroup, ParamState, Params};
use crate::DynTensor;
use crate::autograd::GradientStore;
use crate::backend::kinds::AdamScalars;
use crate::error::Result;
use crate::shape::Layout;
use crate::storage::Storage;

/// Settings of [`Adam`]; [`AdamConfig::adam`] (the default) and [`AdamConfig::adamw`] give
/// PyTorch's defaults.
#[derive(Debug, Clone, Copy)]
pub struct AdamConfig {
    /// Learning rate (used by [`Adam::new`]; groups carry their own).
    pub lr: f64,
    /// Decay rates of the first and second moment averages, each in `[0, 1)`.
    pub betas: (f64, f64),
    /// Added to the square root of the second moment to keep the division finite.
    pub eps: f64,
    /// Weight decay (used by [`Adam::new`]); an L2 term, or decoupled when `decoupled` is set.
    pub weight_decay: f64,
    /// AMSGrad: divide by the running maximum of the second moment instead of its average.
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

/// Adam, or AdamW with `decoupled`, as PyTorch's `torch.optim.Adam` and `torch.optim.AdamW`.
///
/// Adam's first step moves every element by `lr` against the sign of its gradient (the
/// bias-corrected moments are `g` and `g^2`, so the step is `lr * g / (|g| + eps)`); AdamW
/// first shrinks the weights by `1 - lr * weight_decay`:
///
/// ```
/// use rumus::DynTensor;
/// use rumus::optim::{Adam, AdamConfig, Optimizer};
///
/// # fn main() -> rumus::Result<()> {
/// let first_step = |config: AdamConfig| -> rumus::Result<Vec<f32>> {
///     let w = DynTensor::from_vec(vec![1.0f32, -2.0], &[2])?.requires_grad_()?;
///     let mut adam = Adam::new(vec![w.clone()], config)?;
///     let mut grads = w.mul(&w)?.sum_all()?.backward()?; // gradient 2w: signs + and -
///     adam.step(&mut grads)?;
///     w.to_vec::<f32>()
/// };
/// let close = |got: Vec<f32>, want: [f32; 2]| {
///     got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-6)
/// };
/// let adam = first_step(AdamConfig { lr: 0.1, ..AdamConfig::adam() })?;
/// assert!(close(adam, [1.0 - 0.1, -2.0 + 0.1]));
/// let adamw = first_step(AdamConfig { lr: 0.1, weight_decay: 0.5, ..AdamConfig::adamw() })?;
/// assert!(close(adamw, [1.0 * 0.95 - 0.1, -2.0 * 0.95 + 0.1]));
/// # Ok(())
/// # }
/// ```
pub struct Adam {
    params: Params,
    config: AdamConfig,
}

impl Adam {
    /// One group holding `params`, with the config's `lr` and `weight_decay`. Fails when a
    /// tensor does not require a gradient or a setting is out of range.
    pub fn new(params: Vec<crate::DynTensor>, config: AdamConfig) -> Result<Self> {
        Self::with_groups(
            vec![ParamGroup::new(params, config.lr).with_weight_decay(config.weight_decay)],
            config,
        )
    }

    /// Several groups, each with its own learning rate and weight decay. The betas must lie
    /// in `[0, 1)` and `eps` be `>= 0`, as PyTorch requires (and finite).
    pub fn with_groups(groups: Vec<ParamGroup>, config: AdamConfig) -> Result<Self> {
        let (b1, b2) = config.betas;
        limits::settings(
            "Adam",
            [
                limits::fraction("betas.0", b1),
                limits::fraction("betas.1", b2),
                limits::non_negative("eps", config.eps),
            ],
        )?;
        Ok(Adam {
            params: Params::new(groups)?,
            config,
        })
    }
}

/// The whole update in one pass over contiguous `f32`/`f64` memory. Returns `false` (and
/// changes nothing) when a tensor is not laid out for it; the op-by-op path then runs.
fn fused_step(
    p: &DynTensor,
    g: &DynTensor,
    state: &mut ParamState,
    group: &ParamGroup,
    c: &AdamConfig,
) -> Result<bool> {
    let m = state.buffer("exp_avg", || p.zeros_like())?;
    let v = state.buffer("exp_avg_sq", || p.zeros_like())?;
    let (Some(pr), Some(mr), Some(vr)) = (
        p.contiguous_range(),
        m.contiguous_range(),
        v.contiguous_range(),
    ) else {
        return Ok(false);
    };
    let g = g.contiguous_untracked()?;
    let gr = g.contiguous_range().expect("made contiguous");
    let (b1, b2) = c.betas;
    let lr = group.lr;
    let (l2, decay) = if c.decoupled {
        (0.0, 1.0 - lr * group.weight_decay)
    } else {
        (group.weight_decay, 1.0)
    };
    let scalars = AdamScalars {
        step_size: lr / (1.0 - pow_count(b1, state.step)),
        beta1: b1,
        beta2: b2,
        eps: c.eps,
        inv_sqrt_correction2: 1.0 / (1.0 - pow_count(b2, state.step)).sqrt(),
        l2,
        decay,
    };
    let view = |range: std::ops::Range<usize>| Layout::new(&[range.len()], &[1], range.start);
    let (lp, lm, lv, lg) = (view(pr), view(mr), view(vr), view(gr));
    Storage::adam_step(
        [p.operand_as(&lp), m.operand_as(&lm), v.operand_as(&lv)],
        g.operand_as(&lg),
        scalars,
    )
}

impl Optimizer for Adam {
    fn step(&mut self, grads: &mut GradientStore) -> Result<()> {
        let c = self.config;
        let (b1, b2) = c.betas;
        self.params.step(grads, |p, g, state, group| {
            if !c.amsgrad && fused_step(p, &g, state, group, &c)? {
                return Ok(());
            }
            let g = if c.decoupled {
                g
            } else {
                group.l2_gradient(p, g)?
            };
            if c.decoupled && group.weight_decay != 0.0 {
                p.mul_scalar_(1.0 - group.lr * group.weight_decay)?;
            }
            let m = state.buffer("exp_avg", || p.zeros_like())?;
            let v = state.buffer("exp_avg_sq", || p.zeros_like())?;
            m.scale_add_(b1, 1.0 - b1, &g)?;
            v.scale_add_(b2, 1.0 - b2, &g.mul(&g)?)?;
            let (correction1, correction2) = (
                1.0 - pow_count(b1, state.step),
                1.0 - pow_count(b2, state.step),
            );
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
