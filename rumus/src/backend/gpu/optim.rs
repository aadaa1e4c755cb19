//! Launcher of `shaders/optim.wgsl`: the fused Adam/AdamW step.

use super::batch::grid_1d;
use super::context::GpuDevice;
use super::pipelines::Module;
use crate::error::Result;
use crate::tensor::DynTensor;

impl GpuDevice {
    /// One Adam step over contiguous `p`, `g`, `m`, `v` on this device; `scalars` are
    /// `[step size, beta1, beta2, eps, 1 / sqrt(1 - beta2^t), l2, decay]`.
    pub(crate) fn adam(&self, tensors: [&DynTensor; 4], scalars: [f64; 7]) -> Result<()> {
        let [p, _, m, v] = tensors;
        let numel = p.numel();
        let (groups, row) = grid_1d(numel);
        let mut params = vec![numel as u32, row];
        params.extend(tensors.iter().map(|t| t.layout().offset() as u32));
        params.extend(scalars.iter().map(|&s| (s as f32).to_bits()));
        let memories = tensors
            .iter()
            .map(|t| self.memory_of(t))
            .collect::<Result<Vec<_>>>()?;
        let bindings: Vec<(u32, &wgpu::Buffer)> = memories
            .iter()
            .enumerate()
            .map(|(k, memory)| (k as u32 + 1, memory.raw()))
            .collect();
        self.dispatch(Module::Optim, "adam", &params, &bindings, groups);
        for written in [p, m, v] {
            written.storage().mark_written();
        }
        Ok(())
    }
}
