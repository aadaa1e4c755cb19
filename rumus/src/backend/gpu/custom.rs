//! Launchers of a custom op's own WGSL kernels (`ops::custom`), with the bindings and the
//! parameter block that [`Wgsl`] documents.

use super::batch::{PARAM_WORDS, grid_1d};
use super::context::GpuDevice;
use super::memory::{GpuBuffer, check_words};
use super::pipelines::{CustomModule, Module};
use crate::backend::kinds::{CustomKernel, MAX_GPU_INPUTS, MAX_WGSL_PARAMS, Wgsl};
use crate::backend::{Custom, Src};
use crate::dtype::DType;
use crate::error::{DeviceError, Error, Result};

/// Where the op's own parameter words start.
const OWN_PARAMS: usize = 16;

impl Custom for GpuDevice {
    /// The forward kernel over `inputs` (contiguous, on this device) into a new output.
    fn custom_forward(
        &self,
        op: &CustomKernel,
        inputs: &[Src<'_, GpuBuffer>],
        out_dims: &[usize],
    ) -> Result<Option<GpuBuffer>> {
        let (wgsl, custom) = self.custom_module(op, inputs, false)?;
        let numel: usize = out_dims.iter().product();
        let out = GpuBuffer::uninit(self, numel, DType::F32, op.name)?;
        let mut bindings = bound(inputs)?;
        bindings.push((inputs.len() as u32 + 1, out.raw()));
        self.launch_custom(op, custom, wgsl.forward, numel, numel, inputs, &bindings)?;
        Ok(Some(out))
    }

    /// The backward kernel: every input's gradient, kept where `needs` asks for it.
    fn custom_backward(
        &self,
        op: &CustomKernel,
        inputs: &[Src<'_, GpuBuffer>],
        (output, grad): (Src<'_, GpuBuffer>, Src<'_, GpuBuffer>),
        needs: &[bool],
    ) -> Result<Option<Vec<Option<GpuBuffer>>>> {
        let (wgsl, custom) = self.custom_module(op, inputs, true)?;
        let grads = inputs
            .iter()
            .map(|input| GpuBuffer::uninit(self, input.numel(), DType::F32, op.name))
            .collect::<Result<Vec<_>>>()?;
        let read: Vec<Src<'_, GpuBuffer>> = inputs.iter().copied().chain([output, grad]).collect();
        let mut bindings = bound(&read)?;
        let first_grad = inputs.len() as u32 + 3;
        bindings.extend(
            grads
                .iter()
                .enumerate()
                .map(|(k, g)| (first_grad + k as u32, g.raw())),
        );
        let threads = inputs
            .iter()
            .map(Src::numel)
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
        Ok(Some(
            grads
                .into_iter()
                .zip(needs)
                .map(|(g, &need)| need.then_some(g))
                .collect(),
        ))
    }
}

/// Each buffer of `tensors` at its binding, from 1 on (one element per word each).
fn bound<'a>(tensors: &[Src<'a, GpuBuffer>]) -> Result<Vec<(u32, &'a wgpu::Buffer)>> {
    tensors
        .iter()
        .enumerate()
        .map(|(k, t)| {
            check_words(t.dtype(), "GPU kernel")?;
            Ok((k as u32 + 1, t.memory.raw()))
        })
        .collect()
}

impl GpuDevice {
    /// The op's kernels and the module key of this launch, after checking what the
    /// kernels can take.
    fn custom_module(
        &self,
        op: &CustomKernel,
        inputs: &[Src<'_, GpuBuffer>],
        backward: bool,
    ) -> Result<(Wgsl, CustomModule)> {
        let name = op.name;
        let wgsl = op.wgsl.ok_or(DeviceError::NoGpuKernel { op: name })?;
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

    /// Fills the parameter block and queues the launch of `threads` threads.
    #[allow(clippy::too_many_arguments)]
    fn launch_custom(
        &self,
        op: &CustomKernel,
        custom: CustomModule,
        entry: &'static str,
        threads: usize,
        out_numel: usize,
        inputs: &[Src<'_, GpuBuffer>],
        bindings: &[(u32, &wgpu::Buffer)],
    ) -> Result<()> {
        let own = &op.params;
        if own.len() > MAX_WGSL_PARAMS {
            return Err(Error::InvalidArgument {
                op: op.name,
                message: format!(
                    "wgsl_params gave {} words; at most {MAX_WGSL_PARAMS} fit",
                    own.len()
                ),
            });
        }
        let words = |n: usize, what: &str| {
            u32::try_from(n).map_err(|_| Error::InvalidArgument {
                op: op.name,
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
        params[OWN_PARAMS..OWN_PARAMS + own.len()].copy_from_slice(own);
        self.dispatch(Module::Custom(custom), entry, &params, bindings, groups);
        Ok(())
    }
}
