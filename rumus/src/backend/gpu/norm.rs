//! Launchers of `shaders/norm.wgsl`: layer normalisation forward and backward over contiguous
//! rows, a segment of a workgroup per row.

use super::batch::grid_rows;
use super::context::GpuDevice;
use super::elementwise::check_float;
use super::memory::GpuBuffer;
use super::pipelines::Module;
use crate::backend::Reduce;
use crate::backend::kinds::Reduction;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::DynTensor;

/// Elements of a row each invocation keeps in registers (`CACHED` in norm.wgsl).
const CACHED: usize = 16;
/// The widest segment: a whole workgroup.
const WIDEST: usize = 256;

/// Rows longer than this are normalised by the composite ops instead.
pub(crate) const LONGEST_ROW: usize = CACHED * WIDEST;

/// Invocations per row: about eight elements each, from 32 (a warp's worth) to a workgroup.
fn segment_for(n: usize) -> usize {
    n.div_ceil(8).next_power_of_two().clamp(32, WIDEST)
}

/// The grid for `rows` rows in segments of `segment` and its x size.
fn grid_for(rows: usize, segment: usize) -> ([u32; 3], u32) {
    grid_rows(rows.div_ceil(WIDEST / segment))
}

/// `t` with offset-addressable contiguous elements (copied when it is a strided view).
fn contiguous(gpu: &GpuDevice, t: &DynTensor) -> Result<DynTensor> {
    if t.is_contiguous() {
        Ok(t.clone())
    } else {
        gpu.copy_tensor(t)
    }
}

/// What both layer-norm kernels are given: contiguous `x` and weight, and the row geometry.
struct NormRows {
    x: DynTensor,
    weight: Option<DynTensor>,
    n: usize,
    rows: usize,
    segment: usize,
}

impl NormRows {
    fn new(gpu: &GpuDevice, x: &DynTensor, weight: Option<&DynTensor>) -> Result<Self> {
        check_float(x.dtype(), "layer_norm")?;
        let x = contiguous(gpu, x)?;
        let n = x.dims()[x.rank() - 1];
        Ok(NormRows {
            weight: weight.map(|w| contiguous(gpu, w)).transpose()?,
            n,
            rows: x.numel() / n,
            segment: segment_for(n),
            x,
        })
    }

    /// Parameters 0-5 of both kernels (norm.wgsl); each kernel's own follow.
    fn params(&self, row: u32) -> Vec<u32> {
        vec![
            self.rows as u32,
            self.n as u32,
            self.segment as u32,
            row,
            self.x.layout().offset() as u32,
            self.weight
                .as_ref()
                .map_or(0, |w| w.layout().offset() as u32),
        ]
    }

    /// Runs `entry` with `x` at binding 1, the weight (or `x`, when there is none: the flags
    /// keep the kernel off it) at binding 2, and the kernel's own `bindings`.
    fn dispatch(
        &self,
        gpu: &GpuDevice,
        entry: &'static str,
        params: impl FnOnce(Vec<u32>) -> Vec<u32>,
        bindings: &[(u32, &wgpu::Buffer)],
    ) -> Result<()> {
        let (groups, row) = grid_for(self.rows, self.segment);
        let input = gpu.memory_of(&self.x)?;
        let weight = self.weight.as_ref().map(|w| gpu.memory_of(w)).transpose()?;
        let mut all = vec![(1, input.raw()), (2, weight.as_ref().unwrap_or(&input).raw())];
        all.extend_from_slice(bindings);
        gpu.dispatch(Module::Norm, entry, &params(self.params(row)), &all, groups);
        Ok(())
    }
}

impl GpuDevice {
    /// Layer normalisation over the last axis of `x` (f32), with an optional `[n]` weight and
    /// bias; returns the values and each row's `[mean, rstd]` as `[rows, 2]`.
    pub(crate) fn layer_norm(
        &self,
        x: &DynTensor,
        weight: Option<&DynTensor>,
        bias: Option<&DynTensor>,
        eps: f64,
    ) -> Result<(DynTensor, DynTensor)> {
        let norm = NormRows::new(self, x, weight)?;
        let bias = bias.map(|b| contiguous(self, b)).transpose()?;
        let flags = u32::from(norm.weight.is_some()) | (u32::from(bias.is_some()) << 1);
        let bias_offset = bias.as_ref().map_or(0, |b| b.layout().offset() as u32);
        let out = GpuBuffer::uninit(self, norm.x.numel(), DType::F32, "layer_norm")?;
        let stats = GpuBuffer::uninit(self, norm.rows * 2, DType::F32, "layer_norm")?;
        // An absent bias binds `x` in its place; the flags keep the kernel off it.
        let bias_memory = bias.as_ref().map(|b| self.memory_of(b)).transpose()?;
        let input = self.memory_of(&norm.x)?;
        let params = |mut p: Vec<u32>| {
            p.extend([bias_offset, flags, (eps as f32).to_bits()]);
            p
        };
        norm.dispatch(
            self,
            "layer_norm_forward",
            params,
            &[
                (3, bias_memory.as_ref().unwrap_or(&input).raw()),
                (4, out.raw()),
                (5, stats.raw()),
            ],
        )?;
        Ok((
            DynTensor::from_gpu(out, norm.x.dims()),
            DynTensor::from_gpu(stats, &[norm.rows, 2]),
        ))
    }

    /// The gradients of the input, the weight and the bias of [`layer_norm`](Self::layer_norm)
    /// (those `wanted`) given the contiguous gradient of its output.
    pub(crate) fn layer_norm_backward(
        &self,
        grad: &DynTensor,
        x: &DynTensor,
        weight: Option<&DynTensor>,
        stats: &DynTensor,
        [want_x, want_w, want_b]: [bool; 3],
    ) -> Result<[Option<DynTensor>; 3]> {
        let norm = NormRows::new(self, x, weight)?;
        let stats = contiguous(self, stats)?;
        let (rows, n) = (norm.rows, norm.n);
        let sum_rows = |t: &DynTensor| {
            self.with_src(&t.reshape(&[rows, n])?, |x| {
                Reduce::reduce(self, x, &[0], Reduction::Sum)
            })
            .map(|out| DynTensor::from_gpu(out, &[n]))
        };
        let gb = want_b.then(|| sum_rows(grad)).transpose()?;
        let numel = norm.x.numel();
        let dx = want_x
            .then(|| GpuBuffer::uninit(self, numel, DType::F32, "layer_norm"))
            .transpose()?;
        let scaled = want_w
            .then(|| GpuBuffer::uninit(self, numel, DType::F32, "layer_norm"))
            .transpose()?;
        // One written output stands in for the other when only one is wanted (the flags
        // keep the kernel off it); with neither, there is nothing to run.
        let (dx_raw, scaled_raw) = (
            dx.as_ref().map(GpuBuffer::raw),
            scaled.as_ref().map(GpuBuffer::raw),
        );
        let (Some(dx_raw), Some(scaled_raw)) = (dx_raw.or(scaled_raw), scaled_raw.or(dx_raw))
        else {
            return Ok([None, None, gb]);
        };
        let flags =
            u32::from(norm.weight.is_some()) | (u32::from(want_x) << 2) | (u32::from(want_w) << 3);
        let offsets = [grad.layout().offset() as u32, stats.layout().offset() as u32];
        let params = |mut p: Vec<u32>| {
            p.extend([offsets[0], flags, offsets[1]]);
            p
        };
        let (gradient, statistics) = (self.memory_of(grad)?, self.memory_of(&stats)?);
        norm.dispatch(
            self,
            "layer_norm_backward",
            params,
            &[
                (4, dx_raw),
                (5, statistics.raw()),
                (6, gradient.raw()),
                (7, scaled_raw),
            ],
        )?;
        let gx = dx.map(|b| DynTensor::from_gpu(b, norm.x.dims()));
        let gw = scaled
            .map(|b| sum_rows(&DynTensor::from_gpu(b, &[rows, n])))
            .transpose()?;
        Ok([gx, gw, gb])
    }
}
