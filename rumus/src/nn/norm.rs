//! Normalisation layers: LayerNorm, RMSNorm, GroupNorm and BatchNorm (1-D and 2-D).

use super::functional::{RunningStats, batch_norm, group_norm, layer_norm, rms_norm};
use super::mode::TrainingFlag;
use super::module::Module;
use crate::autograd::no_grad;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::storage::CpuBuffer;
use crate::tensor::DynTensor;

fn param(dims: &[usize], value: f64) -> Result<DynTensor> {
    DynTensor::full(dims, value, DType::F32)?.requires_grad_()
}

/// Normalises the last axis (size `D`) with a learned scale and shift, initialised to 1 and 0.
/// As PyTorch's `nn.LayerNorm(D)`.
pub struct LayerNorm<const D: usize> {
    /// Scale, `[D]`.
    pub weight: DynTensor,
    /// Shift, `[D]`.
    pub bias: DynTensor,
    /// Added to the variance before the square root. Default: 1e-5.
    pub eps: f64,
}

impl<const D: usize> LayerNorm<D> {
    /// Weight 1, bias 0, eps 1e-5 (PyTorch's defaults).
    pub fn new() -> Result<Self> {
        Ok(LayerNorm {
            weight: param(&[D], 1.0)?,
            bias: param(&[D], 0.0)?,
            eps: 1e-5,
        })
    }

    /// Any input whose last axis has size `D`.
    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        layer_norm(x, Some(&self.weight), Some(&self.bias), self.eps)
    }
}

impl<const D: usize> Module for LayerNorm<D> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        f(&format!("{prefix}weight"), &self.weight);
        f(&format!("{prefix}bias"), &self.bias);
    }
    fn describe(&self) -> String {
        format!("LayerNorm(({D},), eps={})", self.eps)
    }
}

/// Root-mean-square normalisation of the last axis with a learned scale.
/// `x / sqrt(mean(x^2) + eps) * weight`: no mean subtraction and no bias.
pub struct RmsNorm<const D: usize> {
    /// Scale, `[D]`.
    pub weight: DynTensor,
    /// Added to the mean square before the square root. Default: 1e-6.
    pub eps: f64,
}

impl<const D: usize> RmsNorm<D> {
    /// Weight 1, eps 1e-6.
    pub fn new() -> Result<Self> {
        Ok(RmsNorm {
            weight: param(&[D], 1.0)?,
            eps: 1e-6,
        })
    }

    /// Any input whose last axis has size `D`.
    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        rms_norm(x, Some(&self.weight), self.eps)
    }
}

impl<const D: usize> Module for RmsNorm<D> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        f(&format!("{prefix}weight"), &self.weight);
    }
    fn describe(&self) -> String {
        format!("RMSNorm(({D},), eps={})", self.eps)
    }
}

/// `G` groups over `C` channels of `[N, C, ...]`, as PyTorch's `nn.GroupNorm(G, C)`: each
/// sample's group of `C / G` channels is normalised together, then a per-channel affine.
pub struct GroupNorm<const G: usize, const C: usize> {
    /// Per-channel scale, `[C]`.
    pub weight: DynTensor,
    /// Per-channel shift, `[C]`.
    pub bias: DynTensor,
    /// Added to the variance before the square root. Default: 1e-5.
    pub eps: f64,
}

impl<const G: usize, const C: usize> GroupNorm<G, C> {
    /// Weight 1, bias 0, eps 1e-5 (PyTorch's defaults). `G` must divide `C` (PyTorch
    /// refuses other group counts when the layer is made, too).
    pub fn new() -> Result<Self> {
        if G == 0 || !C.is_multiple_of(G) {
            return Err(crate::error::Error::InvalidArgument {
                op: "GroupNorm",
                message: format!("{G} groups must divide the {C} channels"),
            });
        }
        Ok(GroupNorm {
            weight: param(&[C], 1.0)?,
            bias: param(&[C], 0.0)?,
            eps: 1e-5,
        })
    }

    /// `[N, C, ...]` -> the same shape; an error when `G` does not divide the channels.
    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        group_norm(x, G, Some(&self.weight), Some(&self.bias), self.eps)
    }
}

impl<const G: usize, const C: usize> Module for GroupNorm<G, C> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        f(&format!("{prefix}weight"), &self.weight);
        f(&format!("{prefix}bias"), &self.bias);
    }
    fn describe(&self) -> String {
        format!("GroupNorm({G}, {C}, eps={})", self.eps)
    }
}

/// Batch normalisation over `C` channels: `[N, C]` or `[N, C, L]` (1-D), `[N, C, H, W]` (2-D).
/// Running mean and (unbiased) variance, and the count of training batches, are buffers,
/// saved in the state dict under PyTorch's names.
pub struct BatchNorm<const C: usize> {
    /// Per-channel scale, `[C]`.
    pub weight: DynTensor,
    /// Per-channel shift, `[C]`.
    pub bias: DynTensor,
    /// Running mean per channel, `[C]`, used in evaluation mode.
    pub running_mean: DynTensor,
    /// Running unbiased variance per channel, `[C]`, used in evaluation mode.
    pub running_var: DynTensor,
    /// Training forward passes so far: an `i64` scalar, PyTorch's `num_batches_tracked`.
    pub num_batches_tracked: DynTensor,
    /// Weight of each batch's statistics in the running ones. Default: 0.1.
    pub momentum: f64,
    /// Added to the variance before the square root. Default: 1e-5.
    pub eps: f64,
    training: TrainingFlag,
}

/// Batch normalisation of `[N, C]` or `[N, C, L]`.
pub type BatchNorm1d<const C: usize> = BatchNorm<C>;
/// Batch normalisation of `[N, C, H, W]`.
pub type BatchNorm2d<const C: usize> = BatchNorm<C>;

impl<const C: usize> BatchNorm<C> {
    /// Weight 1, bias 0, running mean 0 and variance 1, momentum 0.1, eps 1e-5, in training
    /// mode (PyTorch's defaults).
    pub fn new() -> Result<Self> {
        Ok(BatchNorm {
            weight: param(&[C], 1.0)?,
            bias: param(&[C], 0.0)?,
            running_mean: DynTensor::zeros(&[C], DType::F32)?,
            running_var: DynTensor::ones(&[C], DType::F32)?,
            num_batches_tracked: DynTensor::zeros(&[], DType::I64)?,
            momentum: 0.1,
            eps: 1e-5,
            training: TrainingFlag::new(),
        })
    }

    /// `[N, C, ...]` -> the same shape. Training mode normalises with the batch statistics
    /// and updates the running ones and `num_batches_tracked`; evaluation mode uses the
    /// running statistics.
    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        let stats = RunningStats {
            mean: &self.running_mean,
            var: &self.running_var,
            momentum: self.momentum,
        };
        let y = batch_norm(
            x,
            Some(stats),
            Some(&self.weight),
            Some(&self.bias),
            self.training.get(),
            self.eps,
        )?;
        if self.training.get() {
            self.count_batch()?;
        }
        Ok(y)
    }

    /// `num_batches_tracked += 1`.
    fn count_batch(&self) -> Result<()> {
        let _guard = no_grad();
        let tracked = &self.num_batches_tracked;
        if tracked.device() == Device::Cpu {
            if let CpuBuffer::I64(count) = &mut *tracked.storage().write()? {
                let at = tracked.layout().offset();
                count[at] = count[at].saturating_add(1);
            }
            return Ok(());
        }
        // GPU kernels have no integer arithmetic: count in f32, exact up to 2^24 batches.
        let next = tracked
            .to_dtype(DType::F32)?
            .add_scalar(1.0)?
            .to_dtype(DType::I64)?;
        tracked.copy_(&next)
    }
}

impl<const C: usize> Module for BatchNorm<C> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        f(&format!("{prefix}weight"), &self.weight);
        f(&format!("{prefix}bias"), &self.bias);
    }
    fn visit_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        f(&format!("{prefix}running_mean"), &self.running_mean);
        f(&format!("{prefix}running_var"), &self.running_var);
        f(
            &format!("{prefix}num_batches_tracked"),
            &self.num_batches_tracked,
        );
    }
    fn set_training(&self, training: bool) {
        self.training.set(training);
    }
    fn training(&self) -> Option<bool> {
        Some(self.training.get())
    }
    fn describe(&self) -> String {
        format!(
            "BatchNorm({C}, eps={}, momentum={})",
            self.eps, self.momentum
        )
    }
}
