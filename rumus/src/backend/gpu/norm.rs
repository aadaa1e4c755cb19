//! Launchers of `shaders/norm.wgsl`: layer normalisation forward and backward over contiguous
//! rows, a segment of a workgroup per row.

use super::batch::grid_rows;
use super::context::GpuDevice;
use super::elementwise::check_float;
use super::memory::GpuBuffer;
use super::operand::Memory;
use super::pipelines::Module;
use crate::backend::cpu::reduce::Reduction;
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
        gpu.copy(t)
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
        check_float(x.dtype(), "layer_norm")?;
        let x = contiguous(self, x)?;
        let weight = weight.map(|w| contiguous(self, w)).transpose()?;
        let bias = bias.map(|b| contiguous(self, b)).transpose()?;
        let n = x.dims()[x.rank() - 1];
        let rows = x.numel() / n;
        let segment = segment_for(n);
        let (groups, row) = grid_for(rows, segment);
        let offset = |t: Option<&DynTensor>| t.map_or(0, |t| t.layout().offset() as u32);
        let flags = u32::from(weight.is_some()) | (u32::from(bias.is_some()) << 1);
        let params = [
            rows as u32,
            n as u32,
            segment as u32,
            row,
            x.layout().offset() as u32,
            offset(weight.as_ref()),
            offset(bias.as_ref()),
            flags,
            (eps as f32).to_bits(),
        ];
        let out = GpuBuffer::uninit(self, x.numel(), DType::F32, "layer_norm")?;
        let stats = GpuBuffer::uninit(self, rows * 2, DType::F32, "layer_norm")?;
        let input = self.memory_of(&x)?;
        // An absent parameter binds `x` in its place; the flags keep the kernel off it.
        let memory_or_input = |t: Option<&DynTensor>| -> Result<Option<Memory>> {
            t.map(|t| self.memory_of(t)).transpose()
        };
        let (w, b) = (memory_or_input(weight.as_ref())?, memory_or_input(bias.as_ref())?);
        self.dispatch(
            Module::Norm,
            "layer_norm_forward",
            &params,
            &[
                (1, input.raw()),
                (2, w.as_ref().unwrap_or(&input).raw()),
                (3, b.as_ref().unwrap_or(&input).raw()),
                (4, out.raw()),
                (5, stats.raw()),
            ],
            groups,
        );
        Ok((
            DynTensor::from_gpu(out, x.dims()),
            DynTensor::from_gpu(stats, &[rows, 2]),
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
        check_float(x.dtype(), "layer_norm")?;
        let x = contiguous(self, x)?;
        let weight = weight.map(|w| contiguous(self, w)).transpose()?;
        let stats = contiguous(self, stats)?;
        let n = x.dims()[x.rank() - 1];
        let rows = x.numel() / n;
        let sum_rows = |t: &DynTensor| {
            self.reduce(
                &t.reshape(&[rows, n])?,
                &[0],
                Reduction::Sum,
                &[n],
            )
        };
        let gb = want_b.then(|| sum_rows(grad)).transpose()?;
        if !want_x && !want_w {
            return Ok([None, None, gb]);
        }
        let segment = segment_for(n);
        let (groups, row) = grid_for(rows, segment);
        let flags = u32::from(weight.is_some())
            | (u32::from(want_x) << 2)
            | (u32::from(want_w) << 3);
        let params = [
            rows as u32,
            n as u32,
            segment as u32,
            row,
            x.layout().offset() as u32,
            weight.as_ref().map_or(0, |w| w.layout().offset() as u32),
            grad.layout().offset() as u32,
            flags,
            stats.layout().offset() as u32,
        ];
        let dx = want_x
            .then(|| GpuBuffer::uninit(self, x.numel(), DType::F32, "layer_norm"))
            .transpose()?;
        let scaled = want_w
            .then(|| GpuBuffer::uninit(self, x.numel(), DType::F32, "layer_norm"))
            .transpose()?;
        let (input, gradient) = (self.memory_of(&x)?, self.memory_of(grad)?);
        let w = weight.as_ref().map(|w| self.memory_of(w)).transpose()?;
        let statistics = self.memory_of(&stats)?;
        // One written output stands in for the other when only one is wanted (the flags
        // keep the kernel off it).
        let (dx_raw, scaled_raw) = (dx.as_ref().map(GpuBuffer::raw), scaled.as_ref().map(GpuBuffer::raw));
        let (Some(dx_raw), Some(scaled_raw)) = (dx_raw.or(scaled_raw), scaled_raw.or(dx_raw))
        else {
            return Ok([None, None, gb]);
        };
        self.dispatch(
            Module::Norm,
            "layer_norm_backward",
            &params,
            &[
                (1, input.raw()),
                (2, w.as_ref().unwrap_or(&input).raw()),
                (4, dx_raw),
                (5, statistics.raw()),
                (6, gradient.raw()),
                (7, scaled_raw),
            ],
            groups,
        );
        let gx = dx.map(|b| DynTensor::from_gpu(b, x.dims()));
        let gw = scaled
            .map(|b| sum_rows(&DynTensor::from_gpu(b, &[rows, n])))
            .transpose()?;
        Ok([gx, gw, gb])
    }
}
