//! Launcher of `shaders/window.wgsl`: im2col / col2im and the pooling window ops.

use super::batch::grid_1d;
use super::context::GpuDevice;
use super::elementwise::check_float;
use super::memory::{GpuBuffer, check_words};
use super::pipelines::Module;
use crate::backend::kinds::{Window2d, WindowKernel};
use crate::backend::{Pointwise, Src, Windows};
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Layout;

/// Which window op `shaders/window.wgsl` runs (its op code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WindowOp {
    Unfold = 0,
    Fold = 1,
    Sum = 2,
    Spread = 3,
    Argmax = 4,
}

impl WindowOp {
    /// The op as users call it.
    fn name(self) -> &'static str {
        match self {
            WindowOp::Unfold => "conv2d",
            WindowOp::Fold => "conv2d backward",
            WindowOp::Sum => "avg_pool2d",
            WindowOp::Spread => "pooling backward",
            WindowOp::Argmax => "max_pool2d",
        }
    }
}

impl GpuDevice {
    /// `op` over the `planes` planes of `x` (read row-major: a strided view is copied first),
    /// shaped `dims`.
    fn window_op(
        &self,
        x: Src<'_, GpuBuffer>,
        op: WindowOp,
        planes: usize,
        w: &Window2d,
        dims: &[usize],
    ) -> Result<GpuBuffer> {
        check_float(x.dtype(), "window op")?;
        if !x.layout.is_contiguous() {
            let copy = Pointwise::copy(self, x)?;
            let layout = Layout::contiguous(x.dims());
            return self.window_op(Src::new(&copy, &layout), op, planes, w, dims);
        }
        check_words(x.dtype(), "GPU kernel")?;
        let [oh, ow] = w.output();
        let per_plane = match op {
            WindowOp::Unfold => w.taps() * oh * ow,
            WindowOp::Fold | WindowOp::Spread => w.input[0] * w.input[1],
            WindowOp::Sum | WindowOp::Argmax => oh * ow,
        };
        // The loops run over every tap of a window (pooling) or of the kernel (fold, spread);
        // lavapipe counts a loop's exit as an iteration, and runs the loops of the switch's
        // other cases once with every invocation masked off.
        if op != WindowOp::Unfold {
            let [kh, kw] = w.kernel;
            self.check_loop_budget(op.name(), (kh + 1) * (kw + 2) + 8)?;
        }
        let numel = planes * per_plane;
        debug_assert_eq!(numel, dims.iter().product::<usize>());
        let dtype = if op == WindowOp::Argmax {
            DType::I64
        } else {
            DType::F32
        };
        let out = GpuBuffer::uninit(self, numel, dtype, "window op")?;
        let (groups, row) = grid_1d(numel);
        let mut params = vec![numel as u32, row, op as u32, x.layout.offset() as u32];
        for pair in [w.input, w.kernel, w.stride, w.padding, w.dilation, [oh, ow]] {
            params.extend(pair.map(|v| v as u32));
        }
        let groups = if numel == 0 { [0, 0, 0] } else { groups };
        self.dispatch(
            Module::Window,
            "window",
            &params,
            &[(1, x.memory.raw()), (2, out.raw())],
            groups,
        );
        Ok(out)
    }
}

impl Windows for GpuDevice {
    fn window(
        &self,
        x: Src<'_, GpuBuffer>,
        kernel: WindowKernel,
        planes: usize,
        window: &Window2d,
        out_dims: &[usize],
    ) -> Result<GpuBuffer> {
        let op = match kernel {
            WindowKernel::Unfold => WindowOp::Unfold,
            WindowKernel::Fold => WindowOp::Fold,
            WindowKernel::Sum => WindowOp::Sum,
            WindowKernel::Spread => WindowOp::Spread,
        };
        self.window_op(x, op, planes, window, out_dims)
    }

    /// The argmax kernel only: the op gathers the values.
    fn max_pool(
        &self,
        x: Src<'_, GpuBuffer>,
        planes: usize,
        window: &Window2d,
    ) -> Result<(Option<GpuBuffer>, GpuBuffer)> {
        let dims = [planes, window.positions()];
        let indices = self.window_op(x, WindowOp::Argmax, planes, window, &dims)?;
        Ok((None, indices))
    }

    /// Columns past the device's largest binding are convolved in slices of the batch.
    fn conv_batch_chunk(&self, x: Src<'_, GpuBuffer>, columns_per_channel: usize) -> Option<usize> {
        let (n, c) = (x.dims()[0], x.dims()[1]);
        let per_sample = (c * columns_per_channel * 4) as u64;
        let limit = self.max_binding_bytes();
        (n > 1 && per_sample * n as u64 > limit)
            .then(|| ((limit / per_sample.max(1)) as usize).max(1))
    }
}
