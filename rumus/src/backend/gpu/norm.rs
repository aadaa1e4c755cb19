//! Launchers of `shaders/norm.wgsl`: layer normalisation forward and backward over contiguous
//! rows, a segment of a workgroup per row.

use super::batch::grid_rows;
use super::context::GpuDevice;
use super::elementwise::check_float;
use super::memory::{GpuBuffer, check_words};
use super::packed::Packed;
use super::pipelines::Module;
use crate::backend::kinds::Reduction;
use crate::backend::{Norm, Reduce, Src};
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Layout;

/// Elements of a row each invocation keeps in registers (`CACHED` in norm.wgsl).
const CACHED: usize = 16;
/// The widest segment: a whole workgroup.
const WIDEST: usize = 256;

/// Rows longer than this are normalised by the composite ops instead.
const LONGEST_ROW: usize = CACHED * WIDEST;

/// Invocations per row: about eight elements each, from 32 (a warp's worth) to a workgroup.
fn segment_for(n: usize) -> usize {
    n.div_ceil(8).next_power_of_two().clamp(32, WIDEST)
}

/// The grid for `rows` rows in segments of `segment` and its x size.
fn grid_for(rows: usize, segment: usize) -> ([u32; 3], u32) {
    grid_rows(rows.div_ceil(WIDEST / segment))
}

/// What both layer-norm kernels are given: contiguous `x` and weight, and the row geometry.
struct NormRows<'a> {
    x: Packed<'a>,
    weight: Option<Packed<'a>>,
    n: usize,
    rows: usize,
    segment: usize,
}

impl<'a> NormRows<'a> {
    fn new(
        gpu: &GpuDevice,
        x: Src<'a, GpuBuffer>,
        weight: Option<Src<'a, GpuBuffer>>,
    ) -> Result<Self> {
        check_float(x.dtype(), "layer_norm")?;
        let n = x.dims()[x.dims().len() - 1];
        Ok(NormRows {
            x: Packed::of(gpu, x)?,
            weight: weight.map(|w| Packed::of(gpu, w)).transpose()?,
            n,
            rows: x.numel() / n,
            segment: segment_for(n),
        })
    }

    /// Parameters 0-5 of both kernels (norm.wgsl); each kernel's own follow.
    fn params(&self, row: u32) -> Vec<u32> {
        vec![
            self.rows as u32,
            self.n as u32,
            self.segment as u32,
            row,
            self.x.offset as u32,
            self.weight.as_ref().map_or(0, |w| w.offset as u32),
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
    ) {
        let (groups, row) = grid_for(self.rows, self.segment);
        let input = self.x.memory();
        let weight = self.weight.as_ref().map_or(input, Packed::memory);
        let mut all = vec![(1, input.raw()), (2, weight.raw())];
        all.extend_from_slice(bindings);
        gpu.dispatch(Module::Norm, entry, &params(self.params(row)), &all, groups);
    }

    /// The sums over the rows of the `[rows, n]` elements of `memory` from `offset`: `[n]`.
    fn sum_rows(&self, gpu: &GpuDevice, memory: &GpuBuffer, offset: usize) -> Result<GpuBuffer> {
        let layout = Layout::new(&[self.rows, self.n], &[self.n, 1], offset);
        gpu.reduce(Src::new(memory, &layout), &[0], Reduction::Sum)
    }
}

impl Norm for GpuDevice {
    /// For `f32` rows of at most `LONGEST_ROW` elements.
    fn layer_norm(
        &self,
        x: Src<'_, GpuBuffer>,
        weight: Option<Src<'_, GpuBuffer>>,
        bias: Option<Src<'_, GpuBuffer>>,
        eps: f64,
    ) -> Result<Option<(GpuBuffer, GpuBuffer)>> {
        if x.dtype() != DType::F32 || x.dims()[x.dims().len() - 1] > LONGEST_ROW {
            return Ok(None);
        }
        let norm = NormRows::new(self, x, weight)?;
        let bias = bias.map(|b| Packed::of(self, b)).transpose()?;
        let flags = u32::from(norm.weight.is_some()) | (u32::from(bias.is_some()) << 1);
        let bias_offset = bias.as_ref().map_or(0, |b| b.offset as u32);
        let out = GpuBuffer::uninit(self, x.numel(), DType::F32, "layer_norm")?;
        let stats = GpuBuffer::uninit(self, norm.rows * 2, DType::F32, "layer_norm")?;
        // An absent bias binds `x` in its place; the flags keep the kernel off it.
        let bias_memory = bias.as_ref().map_or(norm.x.memory(), Packed::memory);
        let params = |mut p: Vec<u32>| {
            p.extend([bias_offset, flags, (eps as f32).to_bits()]);
            p
        };
        norm.dispatch(
            self,
            "layer_norm_forward",
            params,
            &[
                (3, bias_memory.raw()),
                (4, out.raw()),
                (5, stats.raw()),
            ],
        );
        Ok(Some((out, stats)))
    }

    fn layer_norm_backward(
        &self,
        grad: Src<'_, GpuBuffer>,
        x: Src<'_, GpuBuffer>,
        weight: Option<Src<'_, GpuBuffer>>,
        stats: Src<'_, GpuBuffer>,
        [want_x, want_w, want_b]: [bool; 3],
    ) -> Result<[Option<GpuBuffer>; 3]> {
        let norm = NormRows::new(self, x, weight)?;
        let stats = Packed::of(self, stats)?;
        let grad = Packed::of(self, grad)?;
        check_words(grad.memory().dtype(), "GPU kernel")?;
        let gb = want_b
            .then(|| norm.sum_rows(self, grad.memory(), grad.offset))
            .transpose()?;
        let numel = x.numel();
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
        let offsets = [grad.offset as u32, stats.offset as u32];
        let params = |mut p: Vec<u32>| {
            p.extend([offsets[0], flags, offsets[1]]);
            p
        };
        norm.dispatch(
            self,
            "layer_norm_backward",
            params,
            &[
                (4, dx_raw),
                (5, stats.memory().raw()),
                (6, grad.memory().raw()),
                (7, scaled_raw),
            ],
        );
        let gw = scaled
            .map(|b| norm.sum_rows(self, &b, 0))
            .transpose()?;
        Ok([dx, gw, gb])
    }
}
