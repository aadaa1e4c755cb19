//! Pooling and flattening as modules.

use super::module::Module;
use crate::error::Result;
use crate::tensor::DynTensor;

/// Max over `kernel x kernel` windows of `[B, C, H, W]`.
pub struct MaxPool2d {
    /// Window size along both spatial axes.
    pub kernel: usize,
    /// Step between windows along both spatial axes.
    pub stride: usize,
    /// Padding on each side (at most half the kernel); padded positions never win.
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

    /// `[B, C, H, W] -> [B, C, OH, OW]`, as PyTorch's `F.max_pool2d`.
    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        let (k, s, p) = (self.kernel, self.stride, self.padding);
        x.max_pool2d((k, k), (s, s), (p, p))
    }
}

/// Mean over `kernel x kernel` windows of `[B, C, H, W]` (padding counted, as PyTorch's
/// default).
pub struct AvgPool2d {
    /// Window size along both spatial axes.
    pub kernel: usize,
    /// Step between windows along both spatial axes.
    pub stride: usize,
    /// Zero padding on each side (at most half the kernel).
    pub padding: usize,
}

impl AvgPool2d {
    /// Stride equal to the kernel, no padding (PyTorch's default).
    pub fn new(kernel: usize) -> Self {
        AvgPool2d {
            kernel,
            stride: kernel,
            padding: 0,
        }
    }

    /// `[B, C, H, W] -> [B, C, OH, OW]`, as PyTorch's `F.avg_pool2d`.
    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        let (k, s, p) = (self.kernel, self.stride, self.padding);
        x.avg_pool2d((k, k), (s, s), (p, p), true)
    }
}

/// Average pooling to a fixed `[oh, ow]` output whatever the input size.
pub struct AdaptiveAvgPool2d {
    /// Output size `(oh, ow)`.
    pub output: (usize, usize),
}

impl AdaptiveAvgPool2d {
    /// Pooling to an `[oh, ow]` output, as PyTorch's `nn.AdaptiveAvgPool2d((oh, ow))`.
    pub fn new(oh: usize, ow: usize) -> Self {
        AdaptiveAvgPool2d { output: (oh, ow) }
    }

    /// `[B, C, H, W] -> [B, C, oh, ow]`, as PyTorch's `F.adaptive_avg_pool2d`.
    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        x.adaptive_avg_pool2d(self.output)
    }
}

/// Merges axes `start..=end` (PyTorch's `Flatten()` is `start = 1, end = -1`).
pub struct Flatten {
    /// First axis merged; negative counts from the end.
    pub start: isize,
    /// Last axis merged (inclusive); negative counts from the end.
    pub end: isize,
}

impl Flatten {
    /// `start = 1, end = -1`: keeps the batch axis and merges the rest, as PyTorch's default.
    pub fn new() -> Self {
        Flatten { start: 1, end: -1 }
    }

    /// Merges axes `start..=end` of `x` into one (a reshape).
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
