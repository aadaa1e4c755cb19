//! Pooling and flattening as modules.

use super::module::Module;
use crate::error::Result;
use crate::tensor::DynTensor;

/// Max over `kernel x kernel` windows of `[B, C, H, W]`.
pub struct MaxPool2d {
    pub kernel: usize,
    pub stride: usize,
    pub padding: usize,
}

impl MaxPool2d {
    /// Stride equal to the kernel, no padding (PyTorch's default).
    pub fn new(kernel: usize) -> Self {
        MaxPool2d {
            kernel,
            stride: kernel,
            padding: 0,
        }
    }

    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        let (k, s, p) = (self.kernel, self.stride, self.padding);
        x.max_pool2d((k, k), (s, s), (p, p))
    }
}

/// Mean over `kernel x kernel` windows of `[B, C, H, W]` (padding counted, as PyTorch's
/// default).
pub struct AvgPool2d {
    pub kernel: usize,
    pub stride: usize,
    pub padding: usize,
}

impl AvgPool2d {
    pub fn new(kernel: usize) -> Self {
        AvgPool2d {
            kernel,
            stride: kernel,
            padding: 0,
        }
    }

    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        let (k, s, p) = (self.kernel, self.stride, self.padding);
        x.avg_pool2d((k, k), (s, s), (p, p), true)
    }
}

/// Average pooling to a fixed `[oh, ow]` output whatever the input size.
pub struct AdaptiveAvgPool2d {
    pub output: (usize, usize),
}

impl AdaptiveAvgPool2d {
    pub fn new(oh: usize, ow: usize) -> Self {
        AdaptiveAvgPool2d { output: (oh, ow) }
    }

    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        x.adaptive_avg_pool2d(self.output)
    }
}

/// Merges axes `start..=end` (PyTorch's `Flatten()` is `start = 1, end = -1`).
pub struct Flatten {
    pub start: isize,
    pub end: isize,
}

impl Flatten {
    pub fn new() -> Self {
        Flatten { start: 1, end: -1 }
    }

    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        x.flatten(self.start, self.end)
    }
}

impl Default for Flatten {
    fn default() -> Self {
        Self::new()
    }
}

macro_rules! parameterless_module {
    ($name:ident, |$s:ident| $describe:expr) => {
        impl Module for $name {
            fn visit(&self, _prefix: &str, _f: &mut dyn FnMut(&str, &DynTensor)) {}
            fn describe(&self) -> String {
                let $s = self;
                $describe
            }
        }
    };
}

parameterless_module!(MaxPool2d, |s| format!(
    "MaxPool2d(kernel_size={}, stride={}, padding={})",
    s.kernel, s.stride, s.padding
));
parameterless_module!(AvgPool2d, |s| format!(
    "AvgPool2d(kernel_size={}, stride={}, padding={})",
    s.kernel, s.stride, s.padding
));
parameterless_module!(AdaptiveAvgPool2d, |s| format!(
    "AdaptiveAvgPool2d(output_size={:?})",
    s.output
));
parameterless_module!(Flatten, |s| format!(
    "Flatten(start_dim={}, end_dim={})",
    s.start, s.end
));
