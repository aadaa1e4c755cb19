//! Dropout: active in training mode, the identity in evaluation mode.

use super::functional::{activation_dropout, dropout};
use super::mode::TrainingFlag;
use super::module::Module;
use crate::error::Result;
use crate::ops::unary::UnaryOp;
use crate::tensor::DynTensor;

/// Dropout layer, as PyTorch's `nn.Dropout`: see [`dropout`]. Starts in training mode;
/// `Module::set_training(false)` makes it the identity.
pub struct Dropout {
    /// Probability of zeroing each element, in `[0, 1]`.
    pub p: f64,
    training: TrainingFlag,
}

impl Dropout {
    /// A layer in training mode; an error when `p` is outside `[0, 1]`.
    pub fn new(p: f64) -> Result<Self> {
        if !(0.0..=1.0).contains(&p) {
            return Err(crate::Error::InvalidArgument {
                op: "Dropout",
                message: format!("probability {p} is outside [0, 1]"),
            });
        }
        Ok(Dropout {
            p,
            training: TrainingFlag::new(),
        })
    }

    /// In training mode zeroes each element with probability `p` and scales the rest by
    /// `1 / (1 - p)`; the identity in evaluation mode. Any shape (untyped).
    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        dropout(x, self.p, self.training.get())
    }

    /// `self.forward_dyn(&x.unary(activation)?)` as one op ([`activation_dropout`]).
    pub fn after_activation(&self, x: &DynTensor, activation: UnaryOp) -> Result<DynTensor> {
        activation_dropout(x, activation, self.p, self.training.get())
    }
}

impl Module for Dropout {
    fn visit(&self, _prefix: &str, _f: &mut dyn FnMut(&str, &DynTensor)) {}
    fn set_training(&self, training: bool) {
        self.training.set(training);
    }
    fn training(&self) -> Option<bool> {
        Some(self.training.get())
    }
    fn describe(&self) -> String {
        format!("Dropout(p={})", self.p)
    }
}
