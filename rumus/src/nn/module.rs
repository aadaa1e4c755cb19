//! The module machinery every layer and `#[model]` struct shares: named parameters in
//! declaration order, state dicts with dotted names, train/eval mode, devices, summaries.

use super::state_loading::{LoadOptions, LoadReport};
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::DynTensor;

pub use crate::device::Device;

/// Parameters (and buffers) by dotted name, in declaration order, like PyTorch's
/// `state_dict()`.
pub type StateDict = Vec<(String, DynTensor)>;

/// A layer or a model made of layers.
///
/// Layers implement it by hand; `#[model]` implements it for a struct of layers, naming each
/// tensor by its field path, as PyTorch's `state_dict()` does.
///
/// ```
/// use rumus::prelude::*;
///
/// #[model(sequential, activation = relu)]
/// struct Mlp {
///     fc1: Linear<4, 8>,
///     fc2: Linear<8, 2>,
/// }
///
/// fn main() -> rumus::Result<()> {
///     let mlp = Mlp::new()?;
///     let names: Vec<String> = mlp.named_parameters().into_iter().map(|(n, _)| n).collect();
///     assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
///     assert_eq!(mlp.num_parameters(), (4 * 8 + 8) + (8 * 2 + 2));
///
///     // A state dict moves the values into another model of the same structure.
///     let copy = Mlp::new()?;
///     copy.load_state_dict(&mlp.state_dict()?)?;
///     mlp.eval();
///     let x = Tensor::<(D<3>, D<4>)>::randn();
///     assert_eq!(copy.forward(&x)?.to_vec()?, mlp.forward(&x)?.to_vec()?);
///     Ok(())
/// }
/// ```
pub trait Module {
    /// Calls `f` with the dotted name and tensor of every parameter (what an optimizer
    /// trains), in declaration order. `prefix` is the module's own name followed by a dot
    /// (or empty).
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor));

    /// Calls `f` with every buffer: state that is saved and loaded with the parameters but
    /// not trained, such as BatchNorm's running statistics. Layers without buffers need not
    /// implement it.
    fn visit_buffers(&self, _prefix: &str, _f: &mut dyn FnMut(&str, &DynTensor)) {}

    /// Switches training behaviour (dropout, batch statistics) on or off, recursively.
    /// Takes `&self` (layers keep their mode in a [`TrainingFlag`](super::TrainingFlag)),
    /// so a model that is borrowed elsewhere, by a training closure or another thread, can
    /// still be switched.
    fn set_training(&self, _training: bool) {}

    /// Whether the module is in training mode: `None` when nothing in it depends on the
    /// mode (a `Linear`), else the mode of its first mode-dependent layer.
    fn training(&self) -> Option<bool> {
        None
    }

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

    /// The parameters in declaration order (what an optimizer takes); buffers are not
    /// among them, as in PyTorch.
    fn parameters(&self) -> Vec<DynTensor> {
        self.named_parameters()
            .into_iter()
            .map(|(_, t)| t)
            .collect()
    }

    /// Every buffer with its dotted name.
    fn named_buffers(&self) -> StateDict {
        let mut out = Vec::new();
        self.visit_buffers("", &mut |name, t| out.push((name.to_string(), t.clone())));
        out
    }

    /// The buffers in declaration order.
    fn buffers(&self) -> Vec<DynTensor> {
        self.named_buffers().into_iter().map(|(_, t)| t).collect()
    }

    /// The parameters, then the buffers, with their dotted names: everything a state dict
    /// holds (the tensors themselves, not copies).
    fn named_tensors(&self) -> StateDict {
        let mut out = self.named_parameters();
        out.extend(self.named_buffers());
        out
    }

    /// Number of scalar parameters (buffers are not counted, as in PyTorch's
    /// `sum(p.numel() for p in model.parameters())`).
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(DynTensor::numel).sum()
    }

    /// A snapshot of every parameter's and buffer's values (detached host copies: GPU
    /// tensors are read back), by dotted name. Fails when a GPU tensor cannot be read back
    /// (a lost device) or a copy cannot be allocated.
    fn state_dict(&self) -> Result<StateDict> {
        snapshot(self.named_tensors())
    }

    /// Copies values from `state` into the parameters and buffers in place (their
    /// identities, and any optimizer state keyed by them, are kept). Every key must match a
    /// tensor of the same shape; missing and unexpected keys are errors, checked before
    /// anything is written. [`Module::load_state_dict_with`] loads non-strictly or one
    /// sub-module.
    fn load_state_dict(&self, state: &StateDict) -> Result<()> {
        self.load_state_dict_with(state, &LoadOptions::new())
            .map(|_| ())
    }

    /// [`Module::load_state_dict`] with [`LoadOptions`]: `strict(false)` reports missing
    /// and unexpected keys instead of failing (PyTorch's `strict=False`), `prefix` loads
    /// the keys under a sub-module's name. Floating-point values convert to the tensor's
    /// dtype. Everything is checked before anything is written.
    fn load_state_dict_with(&self, state: &StateDict, options: &LoadOptions) -> Result<LoadReport> {
        super::state_loading::load(self, state, options)
    }

    /// Training mode (the default).
    fn train(&self) {
        self.set_training(true);
    }

    /// Evaluation mode: dropout off, running statistics used. [`ModeGuard::eval`](super::ModeGuard::eval)
    /// does the same until a guard is dropped.
    fn eval(&self) {
        self.set_training(false);
    }

    /// Moves every parameter and buffer to `device` in place, like PyTorch's `module.to()`:
    /// the tensors keep their identities, so an optimizer made before the move still holds
    /// them (its state buffers, once a step made them, stay where they were made: move the
    /// model before training).
    fn to_device(&mut self, device: Device) -> Result<()> {
        for (_, tensor) in self.named_tensors() {
            tensor.storage().relocate(&device)?;
        }
        Ok(())
    }

    /// Converts every floating-point parameter and buffer to `dtype` in place, like
    /// PyTorch's `module.to(torch.float64)`: integer buffers stay as they are, and the
    /// tensors keep their identities (make the optimizer after converting; its state
    /// buffers take the parameters' dtype when they are made). `dtype` must be `f16`,
    /// `f32` or `f64`, and `f64` needs the tensors on the CPU. A converted layer runs
    /// through `forward_dyn` on inputs of the same dtype; the typed `forward` is `f32`.
    fn to_dtype(&mut self, dtype: DType) -> Result<()> {
        super::convert::convert_module(self, dtype)
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

/// Detached host copies of `tensors` under the same names (GPU tensors read back): the
/// snapshot a state dict hands out, which later training steps must not change.
pub(crate) fn snapshot(tensors: Vec<(String, DynTensor)>) -> Result<StateDict> {
    tensors
        .into_iter()
        .map(|(name, t)| {
            let values = t.to_contiguous_buffer()?;
            Ok((name, DynTensor::from_buffer(values, t.dims())))
        })
        .collect()
}
