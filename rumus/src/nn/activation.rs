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
            pub fn new() -> Result<Self> {
                Ok($name)
            }

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

activation!(Relu, relu, "ReLU()");
activation!(Sigmoid, sigmoid, "Sigmoid()");
activation!(Tanh, tanh, "Tanh()");
activation!(Gelu, gelu, "GELU()");
activation!(Silu, silu, "SiLU()");
