//! The module machinery every layer and `#[model]` struct shares: named parameters in
//! declaration order, state dicts with dotted names, train/eval mode, devices, summaries.

use std::collections::{HashMap, HashSet};

use crate::autograd::no_grad;
use crate::error::{Error, Result, ShapeError};
use crate::tensor::DynTensor;

pub use crate::device::Device;

/// Parameters (and buffers) by dotted name, in declaration order, like PyTorch's
/// `state_dict()`.
pub type StateDict = Vec<(String, DynTensor)>;

/// A layer or a model made of layers.
pub trait Module {
    /// Calls `f` with the dotted name and tensor of every parameter and buffer, in
    /// declaration order. `prefix` is the module's own name followed by a dot (or empty).
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor));

    /// Switches training behaviour (dropout, batch statistics) on or off, recursively.
    fn set_training(&mut self, _training: bool) {}

    /// One line describing the layer, e.g. `Linear(in_features=784, out_features=10, bias=true)`.
    fn describe(&self) -> String;

    /// Named children, for nested summaries; layers have none.
    fn children(&self) -> Vec<(&'static str, &dyn Module)> {
        Vec::new()
    }

    /// Every parameter with its dotted name.
    fn named_parameters(&self) -> StateDict {
        let mut out = Vec::new();
        self.visit("", &mut |name, t| out.push((name.to_string(), t.clone())));
        out
    }

    /// The parameters in declaration order (what an optimizer takes).
    fn parameters(&self) -> Vec<DynTensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    /// Number of scalar parameters.
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(DynTensor::numel).sum()
    }

    /// A snapshot of every parameter's values (detached copies), by dotted name.
    fn state_dict(&self) -> StateDict {
        self.named_parameters()
            .into_iter()
            .map(|(name, t)| {
                let copy = DynTensor::from_buffer(t.to_contiguous_buffer(), t.dims());
                (name, copy)
            })
            .collect()
    }

    /// Copies values from `state` into the parameters in place (their identities, and any
    /// optimizer state keyed by them, are kept). Every key must match a parameter of the same
    /// shape and dtype; missing and unexpected keys are errors, checked before anything is
    /// written.
    fn load_state_dict(&self, state: &StateDict) -> Result<()> {
        let own = self.named_parameters();
        let own_names: HashSet<&str> = own.iter().map(|(n, _)| n.as_str()).collect();
        let given: HashSet<&str> = state.iter().map(|(n, _)| n.as_str()).collect();
        let mut missing: Vec<&str> = own_names.difference(&given).copied().collect();
        let mut unexpected: Vec<&str> = given.difference(&own_names).copied().collect();
        if !missing.is_empty() || !unexpected.is_empty() {
            missing.sort_unstable();
            unexpected.sort_unstable();
            return Err(Error::InvalidArgument {
                op: "load_state_dict",
                message: format!(
                    "missing keys {}, unexpected keys {}",
                    some_names(&missing),
                    some_names(&unexpected)
                ),
            });
        }
        let by_name: HashMap<&str, &DynTensor> =
            state.iter().map(|(n, t)| (n.as_str(), t)).collect();
        for (name, target) in &own {
            let source = by_name[name.as_str()];
            if source.dims() != target.dims() {
                return Err(ShapeError::Invalid {
                    context: format!("load_state_dict `{name}`"),
                    message: format!(
                        "the model has shape {:?}, the state dict {:?}",
                        target.dims(),
                        source.dims()
                    ),
                }
                .into());
            }
            if source.dtype() != target.dtype() {
                return Err(Error::DTypeMismatch {
                    op: "load_state_dict",
                    lhs: target.dtype(),
                    rhs: source.dtype(),
                });
            }
        }
        let _guard = no_grad();
        for (name, target) in &own {
            let source = by_name[name.as_str()];
            target.copy_(&source.to(&target.device())?)?;
        }
        Ok(())
    }

    /// Training mode (the default).
    fn train(&mut self) {
        self.set_training(true);
    }

    /// Evaluation mode: dropout off, running statistics used.
    fn eval(&mut self) {
        self.set_training(false);
    }

    /// Moves every parameter and buffer to `device` in place, like PyTorch's `module.to()`:
    /// the tensors keep their identities, so an optimizer made before the move still holds
    /// them (its state buffers, once a step made them, stay where they were made: move the
    /// model before training).
    fn to_device(&mut self, device: Device) -> Result<()> {
        for (_, tensor) in self.named_parameters() {
            tensor.storage().relocate(&device)?;
        }
        Ok(())
    }

    /// A PyTorch-style multi-line summary with per-child parameter counts.
    fn summary(&self, name: &str) -> String {
        let children = self.children();
        if children.is_empty() {
            return self.describe();
        }
        let mut out = format!("{name}(\n");
        for (child_name, child) in children {
            let nested = child.summary(&child.describe()).replace('\n', "\n  ");
            out += &format!(
                "  ({child_name}): {nested}  # {} params\n",
                group_digits(child.num_parameters())
            );
        }
        out + ")"
    }
}

/// A sorted list of names for an error message: all of them when few, else the first ten
/// and how many more (a file of 160k foreign keys should not become a 2 MB message).
fn some_names(names: &[&str]) -> String {
    const SHOWN: usize = 10;
    if names.len() <= SHOWN {
        return format!("{names:?}");
    }
    format!("{:?} and {} more", &names[..SHOWN], names.len() - SHOWN)
}

/// `1234567` as `1,234,567`.
pub fn group_digits(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
