//! What every optimizer shares: parameter groups, per-parameter state, and a step that checks
//! every gradient before it changes any parameter.

use std::collections::HashMap;

use super::limits;
use crate::autograd::{GradientStore, no_grad};
use crate::error::{Error, Result, ShapeError};
use crate::tensor::DynTensor;

/// Parameters that share a learning rate and weight decay (PyTorch's param groups).
#[derive(Clone)]
pub struct ParamGroup {
    /// The parameters; each must require a gradient.
    pub params: Vec<DynTensor>,
    /// Learning rate, `>= 0`; schedulers change it.
    pub lr: f64,
    /// Weight decay, `>= 0`; how it applies depends on the optimizer.
    pub weight_decay: f64,
}

impl ParamGroup {
    /// A group with learning rate `lr` and no weight decay.
    pub fn new(params: Vec<DynTensor>, lr: f64) -> Self {
        ParamGroup {
            params,
            lr,
            weight_decay: 0.0,
        }
    }

    /// The group with its weight decay set to `weight_decay`.
    pub fn with_weight_decay(mut self, weight_decay: f64) -> Self {
        self.weight_decay = weight_decay;
        self
    }

    /// `grad + weight_decay * param`: weight decay as an L2 term folded into the gradient
    /// (PyTorch's SGD, Adagrad, RMSprop and Adam; AdamW decays the parameter instead).
    pub(crate) fn l2_gradient(&self, param: &DynTensor, grad: DynTensor) -> Result<DynTensor> {
        if self.weight_decay == 0.0 {
            return Ok(grad);
        }
        grad.add(&param.mul_scalar(self.weight_decay)?)
    }
}

/// Running state of one parameter: its step count and named buffers (momentum, moments).
#[derive(Default, Clone)]
pub struct ParamState {
    /// Updates applied to this parameter so far; incremented before each update, so the
    /// first update sees 1.
    pub step: u64,
    buffers: Vec<(String, DynTensor)>,
}

impl ParamState {
    /// The buffer `name`, created by `init` on first use.
    pub fn buffer(
        &mut self,
        name: &str,
        init: impl FnOnce() -> Result<DynTensor>,
    ) -> Result<DynTensor> {
        if let Some((_, t)) = self.buffers.iter().find(|(n, _)| *n == name) {
            return Ok(t.clone());
        }
        let t = init()?;
        self.buffers.push((name.to_string(), t.clone()));
        Ok(t)
    }
}

/// A snapshot of an optimizer: learning rates, step counts and buffers by name
/// (`"0.1.exp_avg"` is buffer `exp_avg` of parameter 1 in group 0).
#[derive(Clone, Debug, Default)]
pub struct OptimizerState {
    /// Learning rate of each group, in group order.
    pub lrs: Vec<f64>,
    /// Step count of each parameter, keyed `"group.index"`.
    pub steps: Vec<(String, u64)>,
    /// Copies of each parameter's buffers, keyed `"group.index.name"`.
    pub buffers: Vec<(String, DynTensor)>,
}

/// Parameter groups with their state.
pub struct Params {
    pub(crate) groups: Vec<ParamGroup>,
    state: Vec<Vec<ParamState>>,
}

impl Params {
    /// The groups with empty state. Fails when a tensor does not require a gradient or a
    /// learning rate or weight decay is negative or not finite.
    pub fn new(groups: Vec<ParamGroup>) -> Result<Self> {
        for (g, group) in groups.iter().enumerate() {
            if let Some(p) = group.params.iter().find(|p| !p.requires_grad()) {
                return Err(Error::InvalidArgument {
                    op: "optimizer",
                    message: format!(
                        "group {g} holds a tensor {:?} that does not require a gradient; pass parameters (`requires_grad_()`)",
                        p.dims()
                    ),
                });
            }
            limits::settings(
                "optimizer",
                [
                    limits::non_negative(&format!("group {g}'s learning rate"), group.lr),
                    limits::non_negative(&format!("group {g}'s weight decay"), group.weight_decay),
                ],
            )?;
        }
        let state = groups
            .iter()
            .map(|g| vec![ParamState::default(); g.params.len()])
            .collect();
        Ok(Params { groups, state })
    }

    /// Checks every available gradient against its parameter, then takes them out of `grads`
    /// and calls `update` for each parameter that has one. Parameters without a gradient
    /// (frozen or unused) are skipped. Nothing is changed when a check fails.
    pub fn step(
        &mut self,
        grads: &mut GradientStore,
        mut update: impl FnMut(&DynTensor, DynTensor, &mut ParamState, &ParamGroup) -> Result<()>,
    ) -> Result<()> {
        for group in &self.groups {
            for p in &group.params {
                if let Some(g) = grads.get(p) {
                    if g.dims() != p.dims() {
                        return Err(ShapeError::Invalid {
                            context: "optimizer step".into(),
                            message: format!(
                                "gradient {:?} does not match its parameter {:?}",
                                g.dims(),
                                p.dims()
                            ),
                        }
                        .into());
                    }
                    if g.dtype() != p.dtype() {
                        return Err(Error::DTypeMismatch {
                            op: "optimizer step",
                            lhs: p.dtype(),
                            rhs: g.dtype(),
                        });
                    }
                }
            }
        }
        let _guard = no_grad();
        for (group, states) in self.groups.iter().zip(&mut self.state) {
            for (p, state) in group.params.iter().zip(states.iter_mut()) {
                if let Some(g) = grads.get(p).cloned() {
                    state.step += 1;
                    update(p, g, state, group)?;
                }
            }
        }
        Ok(())
    }

    /// A snapshot of the learning rates, step counts and buffers; the buffers are host
    /// copies. Fails when a GPU buffer cannot be read back (a lost device) or a copy cannot
    /// be allocated.
    pub fn state_dict(&self) -> Result<OptimizerState> {
        let mut steps = Vec::new();
        let mut buffers = Vec::new();
        for (g, states) in self.state.iter().enumerate() {
            for (i, state) in states.iter().enumerate() {
                steps.push((format!("{g}.{i}"), state.step));
                buffers.extend(
                    state
                        .buffers
                        .iter()
                        .map(|(name, t)| (format!("{g}.{i}.{name}"), t.clone())),
                );
            }
        }
        Ok(OptimizerState {
            lrs: self.groups.iter().map(|g| g.lr).collect(),
            steps,
            buffers: crate::nn::snapshot(buffers)?,
        })
    }

    /// Restores a snapshot taken from an optimizer of the same kind over the same parameters.
    /// Its learning rates, step counts and buffer values are checked first (finite, rates
    /// and squared averages `>= 0`, counts at most 2^53); on any error nothing has changed.
    pub fn load_state_dict(&mut self, saved: &OptimizerState) -> Result<()> {
        limits::check_state(saved).map_err(|message| Error::InvalidArgument {
            op: "load_state_dict",
            message,
        })?;
        if saved.lrs.len() != self.groups.len() {
            return Err(Error::InvalidArgument {
                op: "load_state_dict",
                message: format!(
                    "the state has {} parameter groups, the optimizer {}",
                    saved.lrs.len(),
                    self.groups.len()
                ),
            });
        }
        let steps: HashMap<&str, u64> = saved.steps.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        let mut restored = Vec::new();
        for (g, group) in self.groups.iter().enumerate() {
            let mut states = Vec::new();
            for (i, p) in group.params.iter().enumerate() {
                let key = format!("{g}.{i}");
                let mut state = ParamState {
                    step: steps.get(key.as_str()).copied().unwrap_or(0),
                    buffers: Vec::new(),
                };
                for (name, t) in saved
                    .buffers
                    .iter()
                    .filter(|(n, _)| n.rsplit_once('.').is_some_and(|(k, _)| k == key))
                {
                    if t.dims() != p.dims() {
                        return Err(ShapeError::Invalid {
                            context: format!("load_state_dict buffer `{name}`"),
                            message: format!(
                                "saved {:?} but the parameter is {:?}",
                                t.dims(),
                                p.dims()
                            ),
                        }
                        .into());
                    }
                    let buffer_name = name.rsplit_once('.').expect("filtered").1.to_string();
                    // On the parameter's device (a checkpoint loads on the host), and sharing
                    // no memory with the snapshot.
                    let copy = DynTensor::zeros_on(t.dims(), t.dtype(), &p.device())?;
                    copy.copy_(&t.to(&p.device())?)?;
                    state.buffers.push((buffer_name, copy));
                }
                states.push(state);
            }
            restored.push(states);
        }
        for (group, lr) in self.groups.iter_mut().zip(&saved.lrs) {
            group.lr = *lr;
        }
        self.state = restored;
        Ok(())
    }
}
