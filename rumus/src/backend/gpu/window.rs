//! Launcher of `shaders/window.wgsl`: im2col / col2im and the pooling window ops.

use super::batch::grid_1d;
use super::context::GpuDevice;
use super::elementwise::check_float;
use super::memory::GpuBuffer;
use super::pipelines::Module;
use crate::backend::cpu::unfold::Window2d;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::DynTensor;

/// Which window op `shaders/window.wgsl` runs (its op code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WindowOp {
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
    /// `op` over the `planes` planes of `x` (contiguous row-major elements), shaped `dims`.
    pub(crate) fn window(
        &self,
        x: &DynTensor,
        op: WindowOp,
        planes: usize,
        w: &Window2d,
        dims: &[usize],
    ) -> Result<DynTensor> {
        check_float(x.dtype(), "window op")?;
        let x = x.contiguous_untracked()?;
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
        let mut params = vec![numel as u32, row, op as u32, x.layout().offset() as u32];
        for pair in [w.input, w.kernel, w.stride, w.padding, w.dilation, [oh, ow]] {
            params.extend(pair.map(|v| v as u32));
        }
        let input = self.memory_of(&x)?;
        let groups = if numel == 0 { [0, 0, 0] } else { groups };
        self.dispatch(
            Module::Window,
            "window",
            &params,
            &[(1, input.raw()), (2, out.raw())],
            groups,
        );
        Ok(DynTensor::from_gpu(out, dims))
    }
}
