//! Convolution layers: 2-D over image batches `[B, C, H, W]`, 1-D over sequences `[B, C, L]`,
//! and the transposed 2-D convolution.

use super::module::Module;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::DynTensor;

/// `Conv2d<IN, OUT, K>`: `IN` input channels, `OUT` output channels, a `K x K` kernel, with
/// stride, padding and dilation chosen at construction (`#[conv(...)]` on a `#[model]` field).
pub struct Conv2d<const IN: usize, const OUT: usize, const K: usize> {
    /// `[OUT, IN, K, K]`, as PyTorch stores it.
    pub weight: DynTensor,
    /// `[OUT]`, absent after [`Conv2d::without_bias`].
    pub bias: Option<DynTensor>,
    /// Step between output positions, the same along both spatial axes.
    pub stride: usize,
    /// Zeros added on each side of both spatial axes.
    pub padding: usize,
    /// Distance between kernel taps (1 = dense), along both spatial axes.
    pub dilation: usize,
    /// Channel groups: each group of `IN / groups` inputs feeds `OUT / groups` outputs.
    pub groups: usize,
}

impl<const IN: usize, const OUT: usize, const K: usize> Conv2d<IN, OUT, K> {
    /// Stride 1, no padding, no dilation.
    pub fn new() -> Result<Self> {
        Self::with_options(1, 0, 1)
    }

    /// Weights and bias drawn from U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = IN * K * K, as
    /// PyTorch's default initialisation.
    pub fn with_options(stride: usize, padding: usize, dilation: usize) -> Result<Self> {
        Self::with_groups(stride, padding, dilation, 1)
    }

    /// A grouped convolution (`groups = IN = OUT` is depthwise): the weight is
    /// `[OUT, IN / groups, K, K]` and the fan-in `IN / groups * K * K`, as PyTorch.
    pub fn with_groups(
        stride: usize,
        padding: usize,
        dilation: usize,
        groups: usize,
    ) -> Result<Self> {
        if stride == 0 || dilation == 0 || K == 0 {
            return Err(Error::InvalidArgument {
                op: "Conv2d",
                message: "kernel size, stride and dilation must be at least 1".into(),
            });
        }
        if groups == 0 || !IN.is_multiple_of(groups) || !OUT.is_multiple_of(groups) {
            return Err(Error::InvalidArgument {
                op: "Conv2d",
                message: format!(
                    "{groups} groups must divide both {IN} input and {OUT} output channels"
                ),
            });
        }
        let bound = super::init::fan_in_bound(IN / groups * K * K);
        Ok(Conv2d {
            weight: DynTensor::uniform(&[OUT, IN / groups, K, K], -bound, bound, DType::F32)?
                .requires_grad_()?,
            bias: Some(DynTensor::uniform(&[OUT], -bound, bound, DType::F32)?.requires_grad_()?),
            stride,
            padding,
            dilation,
            groups,
        })
    }

    /// The layer without its bias term (PyTorch's `bias=False`, the usual choice before a
    /// BatchNorm): `Conv2d::with_options(1, 1, 1)?.without_bias()`.
    pub fn without_bias(mut self) -> Self {
        self.bias = None;
        self
    }

    /// `[B, IN, H, W] -> [B, OUT, H', W']` (untyped).
    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        let (s, p, d) = (self.stride, self.padding, self.dilation);
        x.conv2d(
            &self.weight,
            self.bias.as_ref(),
            (s, s),
            (p, p),
            (d, d),
            self.groups,
        )
    }
}

/// A convolution's weight and, when it has one, its bias.
fn visit_weight_and_bias(
    prefix: &str,
    weight: &DynTensor,
    bias: Option<&DynTensor>,
    f: &mut dyn FnMut(&str, &DynTensor),
) {
    f(&format!("{prefix}weight"), weight);
    if let Some(bias) = bias {
        f(&format!("{prefix}bias"), bias);
    }
}

/// What PyTorch's repr adds for a convolution without a bias.
fn bias_note(bias: Option<&DynTensor>) -> &'static str {
    if bias.is_some() { "" } else { ", bias=False" }
}

impl<const IN: usize, const OUT: usize, const K: usize> Module for Conv2d<IN, OUT, K> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        visit_weight_and_bias(prefix, &self.weight, self.bias.as_ref(), f);
    }

    fn describe(&self) -> String {
        format!(
            "Conv2d({IN}, {OUT}, kernel_size=({K}, {K}), stride=({s}, {s}), padding=({p}, {p}), dilation=({d}, {d}){b})",
            s = self.stride,
            p = self.padding,
            d = self.dilation,
            b = bias_note(self.bias.as_ref())
        )
    }
}

/// 1-D convolution over `[B, IN, L]` (computed as a 2-D convolution of height 1).
pub struct Conv1d<const IN: usize, const OUT: usize, const K: usize> {
    /// `[OUT, IN, K]`, as PyTorch stores it.
    pub weight: DynTensor,
    /// `[OUT]`, absent after [`Conv1d::without_bias`].
    pub bias: Option<DynTensor>,
    /// Step between output positions.
    pub stride: usize,
    /// Zeros added on each side of the sequence.
    pub padding: usize,
    /// Distance between kernel taps (1 = dense).
    pub dilation: usize,
}

impl<const IN: usize, const OUT: usize, const K: usize> Conv1d<IN, OUT, K> {
    /// Stride 1, no padding, no dilation.
    pub fn new() -> Result<Self> {
        Self::with_options(1, 0, 1)
    }

    /// Weights and bias from U(-1/sqrt(IN * K), 1/sqrt(IN * K)), as PyTorch.
    pub fn with_options(stride: usize, padding: usize, dilation: usize) -> Result<Self> {
        let inner = Conv2d::<IN, OUT, K>::with_options(stride, padding, dilation)?;
        let bound = super::init::fan_in_bound(IN * K);
        Ok(Conv1d {
            weight: DynTensor::uniform(&[OUT, IN, K], -bound, bound, DType::F32)?
                .requires_grad_()?,
            bias: inner.bias,
            stride,
            padding,
            dilation,
        })
    }

    /// The layer without its bias term (PyTorch's `bias=False`).
    pub fn without_bias(mut self) -> Self {
        self.bias = None;
        self
    }

    /// `[B, IN, L] -> [B, OUT, L']`.
    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        let (s, p, d) = (self.stride, self.padding, self.dilation);
        let weight = self.weight.unsqueeze(2)?;
        x.unsqueeze(2)?
            .conv2d(&weight, self.bias.as_ref(), (1, s), (0, p), (1, d), 1)?
            .squeeze(2)
    }
}

impl<const IN: usize, const OUT: usize, const K: usize> Module for Conv1d<IN, OUT, K> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        visit_weight_and_bias(prefix, &self.weight, self.bias.as_ref(), f);
    }

    fn describe(&self) -> String {
        format!(
            "Conv1d({IN}, {OUT}, kernel_size=({K},), stride=({},), padding=({},){})",
            self.stride,
            self.padding,
            bias_note(self.bias.as_ref())
        )
    }
}

/// Transposed 2-D convolution (learned upsampling), weight `[IN, OUT, K, K]` like PyTorch.
pub struct ConvTranspose2d<const IN: usize, const OUT: usize, const K: usize> {
    /// `[IN, OUT, K, K]`, as PyTorch stores it.
    pub weight: DynTensor,
    /// `[OUT]`, absent after [`ConvTranspose2d::without_bias`].
    pub bias: Option<DynTensor>,
    /// Upsampling factor: the stride of the convolution this one transposes.
    pub stride: usize,
    /// Removed from each side of the output (the padding of the convolution transposed).
    pub padding: usize,
    /// Extra rows and columns added to one side of the output, to pick among the output
    /// sizes a strided convolution maps to the same input size.
    pub output_padding: usize,
}

impl<const IN: usize, const OUT: usize, const K: usize> ConvTranspose2d<IN, OUT, K> {
    /// Stride 1, no padding, no output padding.
    pub fn new() -> Result<Self> {
        Self::with_options(1, 0, 0)
    }

    /// Weights and bias from U(-1/sqrt(OUT * K * K), ...), PyTorch's fan for this layer.
    pub fn with_options(stride: usize, padding: usize, output_padding: usize) -> Result<Self> {
        if stride == 0 || K == 0 {
            return Err(Error::InvalidArgument {
                op: "ConvTranspose2d",
                message: "kernel size and stride must be at least 1".into(),
            });
        }
        let bound = super::init::fan_in_bound(OUT * K * K);
        Ok(ConvTranspose2d {
            weight: DynTensor::uniform(&[IN, OUT, K, K], -bound, bound, DType::F32)?
                .requires_grad_()?,
            bias: Some(DynTensor::uniform(&[OUT], -bound, bound, DType::F32)?.requires_grad_()?),
            stride,
            padding,
            output_padding,
        })
    }

    /// The layer without its bias term (PyTorch's `bias=False`).
    pub fn without_bias(mut self) -> Self {
        self.bias = None;
        self
    }

    /// `[B, IN, H, W] -> [B, OUT, (H-1)*stride - 2*padding + K + output_padding, ...]`.
    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        let (s, p, op) = (self.stride, self.padding, self.output_padding);
        x.conv_transpose2d(
            &self.weight,
            self.bias.as_ref(),
            (s, s),
            (p, p),
            (op, op),
            (1, 1),
        )
    }
}

impl<const IN: usize, const OUT: usize, const K: usize> Module for ConvTranspose2d<IN, OUT, K> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        visit_weight_and_bias(prefix, &self.weight, self.bias.as_ref(), f);
    }

    fn describe(&self) -> String {
        format!(
            "ConvTranspose2d({IN}, {OUT}, kernel_size=({K}, {K}), stride=({s}, {s}), padding=({p}, {p}){b})",
            s = self.stride,
            p = self.padding,
            b = bias_note(self.bias.as_ref())
        )
    }
}
