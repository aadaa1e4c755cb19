//! Launchers of `shaders/optim.wgsl` (the fused Adam/AdamW step) and the GPU's side of the
//! [`Optim`] contract.

use super::batch::grid_1d;
use super::context::GpuDevice;
use super::memory::GpuBuffer;
use super::pipelines::Module;
use crate::backend::contract::{Dst, Optim, Src};
use crate::backend::kinds::AdamScalars;
use crate::dtype::DType;
use crate::error::Result;

impl Optim for GpuDevice {
    /// One Adam step over contiguous `p`, `m`, `v` and `g` (f32) on this device.
    fn adam_step(
        &self,
        [p, m, v]: [Dst<'_, GpuBuffer>; 3],
        g: Src<'_, GpuBuffer>,
        s: AdamScalars<f64>,
    ) -> Result<bool> {
        if [p.memory.dtype(), m.memory.dtype(), v.memory.dtype(), g.dtype()]
            .iter()
            .any(|&dtype| dtype != DType::F32)
        {
            return Ok(false);
        }
        let numel = p.layout.numel();
        let (groups, row) = grid_1d(numel);
        let mut params = vec![numel as u32, row];
        params.extend(
            [p.layout, g.layout, m.layout, v.layout]
                .iter()
                .map(|layout| layout.offset() as u32),
        );
        let scalars = [
            s.step_size,
            s.beta1,
            s.beta2,
            s.eps,
            s.inv_sqrt_correction2,
            s.l2,
            s.decay,
        ];
        params.extend(scalars.iter().map(|&s| (s as f32).to_bits()));
        let bindings = [
            (1, p.memory.raw()),
            (2, g.memory.raw()),
            (3, m.memory.raw()),
            (4, v.memory.raw()),
        ];
        self.dispatch(Module::Optim, "adam", &params, &bindings, groups);
        Ok(true)
    }

    fn unscale_flagging_non_finite(
        &self,
        g: Src<'_, GpuBuffer>,
        scale: f64,
        flag: Dst<'_, GpuBuffer>,
    ) -> Result<Option<GpuBuffer>> {
        if g.dtype() != DType::F32 || flag.memory.dtype() != DType::I64 {
            return Ok(None);
        }
        self.scale_flagging_non_finite(g, scale, flag.memory).map(Some)
    }
}
