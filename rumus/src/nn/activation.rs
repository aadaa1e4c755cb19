//! Activation functions as modules (for sequential code and summaries).

use super::module::Module;
use crate::error::Result;
use crate::tensor::DynTensor;

macro_rules! activation {
    ($(#[$doc:meta])* $name:ident, $method:ident, $label:literal) => {
        $(#[$doc])*
        #[derive(Debug, Default, Clone, Copy)]
        pub struct $name;

        impl $name {
            /// The module. It has no parameters and never fails; the `Result` matches the
            /// other layers' constructors, which `#[model]` calls as `new()?`.
            pub fn new() -> Result<Self> {
                Ok($name)
            }

            /// Applies the activation elementwise to a tensor of any shape (untyped).
            pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
                x.$method()
            }
        }

        impl Module for $name {
            fn visit(&self, _prefix: &str, _f: &mut dyn FnMut(&str, &DynTensor)) {}
            fn describe(&self) -> String {
                $label.into()
            }
        }
    };
}

activation!(
    /// `max(x, 0)` elementwise, as PyTorch's `nn.ReLU`.
    Relu,
    relu,
    "ReLU()"
);
activation!(
    /// `1 / (1 + e^-x)` elementwise, as PyTorch's `nn.Sigmoid`.
    Sigmoid,
    sigmoid,
    "Sigmoid()"
);
activation!(
    /// Hyperbolic tangent elementwise, as PyTorch's `nn.Tanh`.
    Tanh,
    tanh,
    "Tanh()"
);
activation!(
    /// GELU with the exact normal CDF, as PyTorch's `nn.GELU()` (`approximate='none'`).
    Gelu,
    gelu,
    "GELU()"
);
activation!(
    /// `x * sigmoid(x)` elementwise (swish), as PyTorch's `nn.SiLU`.
    Silu,
    silu,
    "SiLU()"
);
