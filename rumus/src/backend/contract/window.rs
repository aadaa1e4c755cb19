//! Window kernels of convolution and pooling: im2col and its adjoint, window sums and their
//! adjoint, max pooling, and a backend's own direct convolution where it has one.

use super::{Backend, Src};
use crate::backend::kinds::{DirectConv, Window2d, WindowKernel};
use crate::error::Result;

/// Window kernels over the `planes` planes (`[N * C, H, W]`) of an input.
pub trait Windows: Backend {
    /// `kernel` over the `planes` planes of `x` (read row-major), the result contiguous
    /// `out_dims` (float dtypes).
    fn window(
        &self,
        x: Src<'_, Self::Memory>,
        kernel: WindowKernel,
        planes: usize,
        window: &Window2d,
        out_dims: &[usize],
    ) -> Result<Self::Memory> {
        let _ = (x, planes, window, out_dims);
        Err(self.unsupported(kernel.name()))
    }

    /// Max pooling of the `planes` planes of `x` (`[N, C, H * W]`): each window's maximum
    /// (`None` where the backend gathers no values with its argmax: the op then gathers
    /// them) and the `i64` offset of its first maximum in its plane (a NaN wins), both
    /// `[N, C, OH * OW]`.
    fn max_pool(
        &self,
        x: Src<'_, Self::Memory>,
        planes: usize,
        window: &Window2d,
    ) -> Result<(Option<Self::Memory>, Self::Memory)> {
        let _ = (x, planes, window);
        Err(self.unsupported("max_pool2d"))
    }

    /// `conv2d` of `x` (`[N, C, H, W]`) with `weight` and `bias` (shapes and dtypes checked,
    /// one device) over `window`, through direct kernels of the backend's own, with the plan
    /// its backward takes; `None` where the backend has none for this case (the op then
    /// unfolds and multiplies).
    fn conv2d_direct(
        &self,
        x: Src<'_, Self::Memory>,
        weight: Src<'_, Self::Memory>,
        bias: Option<Src<'_, Self::Memory>>,
        window: &Window2d,
        groups: usize,
    ) -> Result<Option<(Self::Memory, DirectConv)>> {
        let _ = (x, weight, bias, window, groups);
        Ok(None)
    }

    /// Depthwise `conv2d` (one filter per channel: `weight` `[C, 1, KH, KW]`, `groups` = C)
    /// of `x` over `window` plus `bias`, for inference (nothing is recorded for a backward
    /// pass); `None` where the backend has no kernel of its own for it (the op then takes
    /// the general path).
    fn depthwise_conv2d(
        &self,
        x: Src<'_, Self::Memory>,
        weight: Src<'_, Self::Memory>,
        bias: Option<Src<'_, Self::Memory>>,
        window: &Window2d,
    ) -> Result<Option<Self::Memory>> {
        let _ = (x, weight, bias, window);
        Ok(None)
    }

    /// The input gradient of a direct convolution `plan` from the output's gradient `dy`.
    fn conv2d_direct_input_grad(
        &self,
        dy: Src<'_, Self::Memory>,
        weight: Src<'_, Self::Memory>,
        plan: &DirectConv,
    ) -> Result<Self::Memory> {
        let _ = (dy, weight, plan);
        Err(self.unsupported("conv2d"))
    }

    /// The weight gradient of a direct convolution `plan` from its input and `dy`.
    fn conv2d_direct_weight_grad(
        &self,
        x: Src<'_, Self::Memory>,
        dy: Src<'_, Self::Memory>,
        plan: &DirectConv,
    ) -> Result<Self::Memory> {
        let _ = (x, dy, plan);
        Err(self.unsupported("conv2d"))
    }

    /// The bias gradient of a direct convolution `plan` from `dy`.
    fn conv2d_direct_bias_grad(
        &self,
        dy: Src<'_, Self::Memory>,
        plan: &DirectConv,
    ) -> Result<Self::Memory> {
        let _ = (dy, plan);
        Err(self.unsupported("conv2d"))
    }

    /// Samples per slice when `conv2d`'s columns of `x` (`[N, C, ..]`, `C *
    /// columns_per_channel` elements per sample) would not fit the backend at once: the op
    /// then convolves slices of the batch. `None` when the whole batch fits.
    fn conv_batch_chunk(
        &self,
        x: Src<'_, Self::Memory>,
        columns_per_channel: usize,
    ) -> Option<usize> {
        let _ = (x, columns_per_channel);
        None
    }
}
