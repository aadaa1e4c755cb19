//! The optimizer interface. An optimizer reads the gradients of its own parameters from a
//! shared [`GradientStore`](crate::GradientStore), so several optimizers can share one
//! backward pass, and leaves them there to be inspected (clipped, logged) after the step,
//! as PyTorch does until `zero_grad`.

use super::params::{OptimizerState, ParamGroup, Params};
use crate::autograd::GradientStore;
use crate::error::Result;

/// An update rule over parameter groups (PyTorch's `torch.optim.Optimizer`).
///
/// Implementors provide [`step`](Optimizer::step) and access to their [`Params`]; learning
/// rates and state snapshots come with the trait.
pub trait Optimizer {
    /// Updates every parameter that has a gradient in `grads`; the gradients stay in the
    /// store. All gradients are checked first; on an error no parameter has changed.
    fn step(&mut self, grads: &mut GradientStore) -> Result<()>;

    /// The parameter groups and their state.
    fn params(&self) -> &Params;
    /// The parameter groups and their state, mutably.
    fn params_mut(&mut self) -> &mut Params;

    /// The parameter groups (parameters, learning rate, weight decay).
    fn param_groups(&self) -> &[ParamGroup] {
        &self.params().groups
    }

    /// Learning rate of every group (what schedulers set).
    fn lrs(&self) -> Vec<f64> {
        self.param_groups().iter().map(|g| g.lr).collect()
    }

    /// Sets the learning rate of each group, in order. Values beyond the number of groups are
    /// ignored; groups beyond the values keep their rate.
    fn set_lrs(&mut self, lrs: &[f64]) {
        for (group, &lr) in self.params_mut().groups.iter_mut().zip(lrs) {
            group.lr = lr;
        }
    }

    /// A snapshot of learning rates, step counts and buffers (host copies); fails when a GPU
    /// buffer cannot be read back or a copy cannot be allocated.
    fn state_dict(&self) -> Result<OptimizerState> {
        self.params().state_dict()
    }

    /// Restores [`Optimizer::state_dict`].
    fn load_state_dict(&mut self, state: &OptimizerState) -> Result<()> {
        self.params_mut().load_state_dict(state)
    }
}
