//! Launchers of a custom op's own WGSL kernels (`ops::custom`), with the bindings and the
//! parameter block that `ops::custom::Wgsl` documents.

use super::batch::{PARAM_WORDS, grid_1d};
use super::context::GpuDevice;
use super::memory::GpuBuffer;
use super::pipelines::{CustomModule, Module};
use crate::dtype::DType;
use crate::error::{DeviceError, Error, Result};
use crate::ops::custom::{ErasedCustomOp, MAX_GPU_INPUTS, MAX_WGSL_PARAMS, Wgsl};
use crate::tensor::DynTensor;

/// Where the op's own parameter words start.
const OWN_PARAMS: usize = 16;

impl GpuDevice {
    /// The forward kernel over `inputs` (contiguous, on this device) into a new output.
    pub(crate) fn custom_forward(
        &self,
        op: &dyn ErasedCustomOp,
        inputs: &[DynTensor],
        out_dims: &[usize],
    ) -> Result<DynTensor> {
        let (wgsl, custom) = self.custom_module(op, inputs, false)?;
        let numel: usize = out_dims.iter().product();
        let out = GpuBuffer::uninit(self, numel, DType::F32, op.name())?;
        let memories = self.memories(inputs)?;
        let mut bindings: Vec<(u32, &wgpu::Buffer)> = memories
            .iter()
            .enumerate()
            .map(|(k, memory)| (k as u32 + 1, memory.raw()))
            .collect();
        bindings.push((inputs.len() as u32 + 1, out.raw()));
        self.launch_custom(op, custom, wgsl.forward, numel, numel, inputs, &bindings)?;
        Ok(DynTensor::from_gpu(out, out_dims))
    }

    /// The backward kernel: every input's gradient, kept where `needs` asks for it.
    pub(crate) fn custom_backward(
        &self,
        op: &dyn ErasedCustomOp,
        inputs: &[DynTensor],
        output: &DynTensor,
        grad: &DynTensor,
        needs: &[bool],
    ) -> Result<Vec<Option<DynTensor>>> {
        let (wgsl, custom) = self.custom_module(op, inputs, true)?;
        let grads = inputs
            .iter()
            .map(|input| GpuBuffer::uninit(self, input.numel(), DType::F32, op.name()))
            .collect::<Result<Vec<_>>>()?;
        let read: Vec<DynTensor> = inputs
            .iter()
            .chain([output, grad])
            .cloned()
            .collect();
        let memories = self.memories(&read)?;
        let mut bindings: Vec<(u32, &wgpu::Buffer)> = memories
            .iter()
            .enumerate()
            .map(|(k, memory)| (k as u32 + 1, memory.raw()))
            .collect();
        let first_grad = inputs.len() as u32 + 3;
        bindings.extend(
            grads
                .iter()
                .enumerate()
                .map(|(k, g)| (first_grad + k as u32, g.raw())),
        );
        let threads = inputs
            .iter()
            .map(DynTensor::numel)
            .chain([output.numel()])
            .max()
            .unwrap_or(0);
        self.launch_custom(
            op,
            custom,
            wgsl.backward,
            threads,
            output.numel(),
            inputs,
            &bindings,
        )?;
        Ok(grads
            .into_iter()
            .zip(inputs)
            .zip(needs)
            .map(|((g, input), &need)| need.then(|| DynTensor::from_gpu(g, input.dims())))
            .collect())
    }

    /// The op's kernels and the module key of this launch, after checking what the
    /// kernels can take.
    fn custom_module(
        &self,
        op: &dyn ErasedCustomOp,
        inputs: &[DynTensor],
        backward: bool,
    ) -> Result<(Wgsl, CustomModule)> {
        let name = op.name();
        let wgsl = op.wgsl().ok_or(DeviceError::NoGpuKernel { op: name })?;
        if let Some(t) = inputs.iter().find(|t| t.dtype() != DType::F32) {
            return Err(DeviceError::UnsupportedDType {
                op: name,
                dtype: t.dtype(),
            }
            .into());
        }
        if inputs.len() > MAX_GPU_INPUTS {
            return Err(Error::InvalidArgument {
                op: name,
                message: format!(
                    "{} inputs; a custom op's GPU kernels take at most {MAX_GPU_INPUTS}",
                    inputs.len()
                ),
            });
        }
        let custom = CustomModule {
            source: wgsl.source,
            inputs: inputs.len(),
            backward,
        };
        let entry = if backward { wgsl.backward } else { wgsl.forward };
        self.0
            .pipelines
            .custom(&self.0.device, custom, entry)
            .map_err(|message| {
                super::context::gpu_error(format!(
                    "{name}: wgpu refused the custom op's WGSL entry point `{entry}`: {message}"
                ))
            })?;
        Ok((wgsl, custom))
    }

    fn memories(&self, tensors: &[DynTensor]) -> Result<Vec<super::operand::Memory>> {
        tensors.iter().map(|t| self.memory_of(t)).collect()
    }

    /// Fills the parameter block and queues the launch of `threads` threads.
    #[allow(clippy::too_many_arguments)]
    fn launch_custom(
        &self,
        op: &dyn ErasedCustomOp,
        custom: CustomModule,
        entry: &'static str,
        threads: usize,
        out_numel: usize,
        inputs: &[DynTensor],
        bindings: &[(u32, &wgpu::Buffer)],
    ) -> Result<()> {
        let own = op.wgsl_params();
        if own.len() > MAX_WGSL_PARAMS {
            return Err(Error::InvalidArgument {
                op: op.name(),
                message: format!(
                    "wgsl_params gave {} words; at most {MAX_WGSL_PARAMS} fit",
                    own.len()
                ),
            });
        }
        let words = |n: usize, what: &str| {
            u32::try_from(n).map_err(|_| Error::InvalidArgument {
                op: op.name(),
                message: format!("{what} of {n} elements is beyond a GPU kernel's 32-bit index"),
            })
        };
        let mut params = vec![0u32; PARAM_WORDS];
        let (groups, row) = grid_1d(threads);
        params[0] = words(threads, "a launch")?;
        params[1] = row;
        params[2] = words(out_numel, "an output")?;
        for (k, input) in inputs.iter().enumerate() {
            params[3 + k] = words(input.numel(), "an input")?;
        }
        params[OWN_PARAMS..OWN_PARAMS + own.len()].copy_from_slice(&own);
        self.dispatch(Module::Custom(custom), entry, &params, bindings, groups);
        Ok(())
    }
}
