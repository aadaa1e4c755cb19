//! Dynamic loss scaling (PyTorch's `torch.amp.GradScaler`). Gradients computed in half
//! precision underflow to zero when they are small; multiplying the loss by a large factor
//! before the backward pass lifts them into range, and dividing the gradients by the same
//! factor before the step puts them back. When the factor is so large that some gradient
//! overflows (inf or NaN), the step is skipped and the factor shrinks; after a run of good
//! steps it grows again, so it settles just below the overflow point.
//!
//! ```
//! use rumus::DynTensor;
//! use rumus::optim::{GradScaler, Optimizer, Sgd, SgdConfig};
//!
//! # fn main() -> rumus::Result<()> {
//! let w = DynTensor::from_vec(vec![1.0f32, -2.0], &[2])?.requires_grad_()?;
//! let mut sgd = Sgd::new(vec![w.clone()], SgdConfig { lr: 0.1, ..Default::default() })?;
//! let mut scaler = GradScaler::new();
//! let loss = w.mul(&w)?.sum_all()?;
//! let mut grads = scaler.scale(&loss)?.backward()?;
//! let stepped = scaler.step(&mut sgd, &mut grads)?;
//! scaler.update();
//! assert!(stepped);
//! let w = w.to_vec::<f32>()?; // w - 0.1 * 2w
//! assert!((w[0] - 0.8).abs() < 1e-6 && (w[1] + 1.6).abs() < 1e-6);
//! # Ok(())
//! # }
//! ```

use std::collections::HashSet;

use super::optimizer::Optimizer;
use crate::autograd::{GradientStore, TensorId, no_grad};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::storage::Storage;
use crate::tensor::DynTensor;

/// How the scale starts and moves; the defaults are PyTorch's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradScalerConfig {
    /// The first scale, `> 0`.
    pub init_scale: f64,
    /// What the scale is multiplied by after `growth_interval` steps without overflow, `> 1`.
    pub growth_factor: f64,
    /// What the scale is multiplied by after an overflow, in `(0, 1)`.
    pub backoff_factor: f64,
    /// Steps without overflow before the scale grows, `>= 1`.
    pub growth_interval: u32,
}

impl Default for GradScalerConfig {
    fn default() -> Self {
        GradScalerConfig {
            init_scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
        }
    }
}

/// The scale and where it stands, as checkpoints save it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GradScalerState {
    /// The current scale.
    pub scale: f64,
    /// Steps without overflow since the scale last changed.
    pub growth_tracker: u32,
}

/// Scales the loss, unscales the gradients, skips steps whose gradients overflowed and
/// adjusts the scale. Each iteration: [`scale`](GradScaler::scale) the loss, back-propagate,
/// optionally [`unscale`](GradScaler::unscale) (to clip), [`step`](GradScaler::step), then
/// [`update`](GradScaler::update).
#[derive(Debug, Clone)]
pub struct GradScaler {
    config: GradScalerConfig,
    state: GradScalerState,
    /// Whether a gradient unscaled since the last update was inf or NaN; `None` when none
    /// was unscaled. It moves the scale in [`update`](GradScaler::update).
    found_inf: Option<bool>,
    /// The parameters whose gradients were unscaled since the last update.
    unscaled: HashSet<TensorId>,
    /// Those of them unscaled together with an inf or NaN gradient (one optimizer's, one
    /// [`unscale`](GradScaler::unscale) call): a step of an optimizer holding any of them
    /// is skipped, while other optimizers still step, as in PyTorch.
    overflowed: HashSet<TensorId>,
}

impl Default for GradScaler {
    fn default() -> Self {
        GradScaler::new()
    }
}

impl GradScaler {
    /// A scaler with PyTorch's defaults: scale 2^16, doubled after 2000 good steps, halved on
    /// an overflow.
    pub fn new() -> Self {
        GradScaler::with_config(GradScalerConfig::default()).expect("the defaults are valid")
    }

    /// A scaler with `config`, checked.
    pub fn with_config(config: GradScalerConfig) -> Result<Self> {
        let invalid = |message: String| {
            Err(Error::InvalidArgument {
                op: "GradScaler",
                message,
            })
        };
        if !(config.init_scale.is_finite() && config.init_scale > 0.0) {
            return invalid(format!(
                "init_scale must be a positive finite number, got {}",
                config.init_scale
            ));
        }
        if !(config.growth_factor.is_finite() && config.growth_factor > 1.0) {
            return invalid(format!(
                "growth_factor must be greater than 1, got {}",
                config.growth_factor
            ));
        }
        if !(config.backoff_factor > 0.0 && config.backoff_factor < 1.0) {
            return invalid(format!(
                "backoff_factor must be between 0 and 1 (exclusive), got {}",
                config.backoff_factor
            ));
        }
        if config.growth_interval == 0 {
            return invalid("growth_interval must be at least 1".into());
        }
        Ok(GradScaler {
            config,
            state: GradScalerState {
                scale: config.init_scale,
                growth_tracker: 0,
            },
            found_inf: None,
            unscaled: HashSet::new(),
            overflowed: HashSet::new(),
        })
    }

    /// The current scale.
    pub fn scale_factor(&self) -> f64 {
        self.state.scale
    }

    /// `loss` times the scale, recorded, to back-propagate instead of `loss`.
    pub fn scale(&self, loss: &DynTensor) -> Result<DynTensor> {
        loss.mul_scalar(self.state.scale)
    }

    /// Divides the gradients of `optimizer`'s parameters by the scale, in `grads`, and
    /// returns whether they are all finite. [`step`](GradScaler::step) does this itself;
    /// call it first only to work on the true gradients (clipping). Unscaling the same
    /// parameter twice before [`update`](GradScaler::update) is an error.
    pub fn unscale<O: Optimizer + ?Sized>(
        &mut self,
        optimizer: &O,
        grads: &mut GradientStore,
    ) -> Result<bool> {
        let params: Vec<&DynTensor> = optimizer
            .param_groups()
            .iter()
            .flat_map(|group| &group.params)
            .collect();
        if let Some(twice) = params
            .iter()
            .find(|p| p.id().is_some_and(|id| self.unscaled.contains(&id)))
        {
            return Err(Error::InvalidArgument {
                op: "GradScaler::unscale",
                message: format!(
                    "the gradient of parameter {:?} was already unscaled in this iteration; call \
                     `update` after each step before unscaling again",
                    twice.dims()
                ),
            });
        }
        let _guard = no_grad();
        let inverse = 1.0 / self.state.scale;
        // Each f32 gradient is unscaled by one kernel that also raises a flag of its device
        // where an element is infinite or NaN; the flags are read once per device. For other
        // dtypes a sum of elements is non-finite whenever one of them is, so one
        // sum per gradient finds every inf and NaN, also read once per device; a sum of
        // finite elements can overflow too: only then is each such gradient checked exactly
        // (times zero, it sums to zero exactly when every element is finite).
        let mut flags: Vec<DynTensor> = Vec::new();
        let mut checks: Vec<DynTensor> = Vec::new();
        let mut summed = Vec::new();
        let mut ids = Vec::new();
        for p in &params {
            let Some(id) = p.id() else { continue };
            let Some(g) = grads.remove(p) else { continue };
            let g = match unscale_flagging(&g, inverse, &mut flags)? {
                Some(unscaled) => unscaled,
                None => {
                    let unscaled = g.mul_scalar(inverse)?;
                    add_on_device(&mut checks, unscaled.sum_all()?)?;
                    summed.push(unscaled.clone());
                    unscaled
                }
            };
            grads.accumulate(id, g)?;
            ids.push(id);
        }
        let mut finite = true;
        for flag in flags {
            finite &= flag.to_vec::<i64>()?.first() == Some(&0);
        }
        if finite && !all_finite(checks)? {
            let mut exact = Vec::new();
            for g in &summed {
                add_on_device(&mut exact, g.mul_scalar(0.0)?.sum_all()?)?;
            }
            finite = all_finite(exact)?;
        }
        if !finite {
            self.overflowed.extend(ids.iter().copied());
        }
        self.unscaled.extend(ids);
        let found_inf = self.found_inf.unwrap_or(false) || !finite;
        self.found_inf = Some(found_inf);
        Ok(finite)
    }

    /// Unscales the gradients of `optimizer`'s parameters (unless [`unscale`] did already)
    /// and steps `optimizer` if they are all finite. Returns whether it stepped; a skipped
    /// step leaves the parameters and the optimizer's state as they were. With several
    /// optimizers, each is skipped or stepped on its own gradients (PyTorch's rule), and
    /// [`update`](GradScaler::update) lowers the scale if any of them overflowed.
    ///
    /// [`unscale`]: GradScaler::unscale
    pub fn step<O: Optimizer + ?Sized>(
        &mut self,
        optimizer: &mut O,
        grads: &mut GradientStore,
    ) -> Result<bool> {
        let all_unscaled = optimizer
            .param_groups()
            .iter()
            .flat_map(|group| &group.params)
            .all(|p| p.id().is_none_or(|id| self.unscaled.contains(&id)) || grads.get(p).is_none());
        if !all_unscaled {
            self.unscale(&*optimizer, grads)?;
        }
        let overflowed = optimizer
            .param_groups()
            .iter()
            .flat_map(|group| &group.params)
            .any(|p| p.id().is_some_and(|id| self.overflowed.contains(&id)));
        if overflowed {
            return Ok(false);
        }
        optimizer.step(grads)?;
        Ok(true)
    }

    /// Moves the scale for the next iteration: down by `backoff_factor` if this iteration
    /// found an inf or NaN, up by `growth_factor` after `growth_interval` clean iterations.
    /// An iteration that unscaled nothing leaves it as it is.
    pub fn update(&mut self) {
        self.unscaled.clear();
        self.overflowed.clear();
        let Some(found_inf) = self.found_inf.take() else {
            return;
        };
        let state = &mut self.state;
        if found_inf {
            state.scale *= self.config.backoff_factor;
            state.growth_tracker = 0;
        } else {
            state.growth_tracker += 1;
            if state.growth_tracker == self.config.growth_interval {
                state.scale *= self.config.growth_factor;
                state.growth_tracker = 0;
            }
        }
    }

    /// The scale and growth count, to save with a checkpoint.
    pub fn state_dict(&self) -> GradScalerState {
        self.state
    }

    /// Restores [`GradScaler::state_dict`].
    pub fn load_state_dict(&mut self, state: GradScalerState) -> Result<()> {
        if !(state.scale.is_finite() && state.scale > 0.0) {
            return Err(Error::InvalidArgument {
                op: "GradScaler::load_state_dict",
                message: format!(
                    "the saved scale {} is not a positive finite number",
                    state.scale
                ),
            });
        }
        self.state = state;
        Ok(())
    }
}

/// `g * inverse` by the backend's kernel that raises its device's flag in `flags` (made on
/// first use) for an infinite or NaN element; `None` for gradients it does not take (dtypes
/// other than f32).
fn unscale_flagging(
    g: &DynTensor,
    inverse: f64,
    flags: &mut Vec<DynTensor>,
) -> Result<Option<DynTensor>> {
    if g.dtype() != DType::F32 {
        return Ok(None);
    }
    let device = g.device();
    let flag = match flags.iter().find(|f| f.device() == device) {
        Some(flag) => flag.clone(),
        None => {
            let flag = DynTensor::zeros_on(&[1], DType::I64, &device)?;
            flags.push(flag.clone());
            flag
        }
    };
    let out = Storage::unscale_flagging_non_finite(g.operand(), inverse, flag.operand())?;
    Ok(out.map(|out| DynTensor::computed(out, g.dims())))
}

/// Adds `check` (a scalar) to the running sum of its device in `sums`.
fn add_on_device(sums: &mut Vec<DynTensor>, check: DynTensor) -> Result<()> {
    match sums.iter_mut().find(|c| c.device() == check.device()) {
        Some(sum) => *sum = sum.add(&check.to_dtype(sum.dtype())?)?,
        None => sums.push(check),
    }
    Ok(())
}

/// Whether every per-device sum is finite (one read per device).
fn all_finite(sums: Vec<DynTensor>) -> Result<bool> {
    let mut finite = true;
    for sum in sums {
        finite &= match sum.dtype() {
            DType::F64 => sum.item::<f64>()?.is_finite(),
            _ => sum.to_dtype(DType::F32)?.item::<f32>()?.is_finite(),
        };
    }
    Ok(finite)
}
