//! How WGSL kernels see their operands: a buffer plus a strided view (dims, strides, offset in
//! elements, merged by [`Strided`]) written into a parameter block.

use std::sync::Arc;

use super::context::GpuDevice;
use super::memory::GpuBuffer;
use super::transfer::upload;
use crate::backend::cpu::CpuBuffer;
use crate::error::Result;

pub(crate) use crate::backend::strided::{MAX_RANK, Strided};

impl GpuDevice {
    /// Element `index` of host memory as a one-element buffer on this device, uploaded once
    /// per value and kept: the rank-0 host tensors that join GPU ops (ReLU's `0`, a scale)
    /// take the same few values over and over.
    pub(crate) fn constant(&self, host: &CpuBuffer, index: usize) -> Result<Arc<GpuBuffer>> {
        let value = crate::backend::cpu::map_buffer!(host, |v| vec![v[index]]);
        let key = (value.dtype(), scalar_bits(&value));
        let mut constants = self.0.constants.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(buffer) = constants.get(&key) {
            return Ok(buffer.clone());
        }
        let buffer = Arc::new(upload(self, &value)?);
        if constants.len() < 4096 {
            constants.insert(key, buffer.clone());
        }
        Ok(buffer)
    }
}

fn scalar_bits(buffer: &CpuBuffer) -> u32 {
    match buffer {
        CpuBuffer::F32(v) => v[0].to_bits(),
        CpuBuffer::I64(v) => v[0] as u32,
        CpuBuffer::Bool(v) => u32::from(v[0]),
        CpuBuffer::F64(v) => (v[0] as f32).to_bits(),
        CpuBuffer::F16(v) => u32::from(v[0].to_bits()),
        CpuBuffer::BF16(v) => u32::from(v[0].to_bits()),
    }
}

/// Index of each field in the parameter block of a strided kernel (`shaders/elementwise.wgsl`
/// and `shaders/index.wgsl` read the same positions).
pub(crate) mod slot {
    pub const NUMEL: usize = 0;
    pub const RANK: usize = 1;
    pub const OP: usize = 2;
    pub const FLAGS: usize = 3;
    pub const SCALAR0: usize = 4;
    pub const SCALAR1: usize = 5;
    pub const ROW: usize = 6;
    pub const DTYPE: usize = 7;
    pub const DIMS: usize = 8;
    /// Strides of operand `k` start at `STRIDES + 8 k`; its offset is at `OFFSETS + k`.
    pub const STRIDES: usize = 16;
    pub const OFFSETS: usize = 48;
    /// Threads launched (a thread handles elements `i`, `i + SPAN`, ...).
    pub const SPAN: usize = 52;
    /// Dropout's seed (two words), probability and scale.
    pub const DROP: usize = 53;
}

/// A parameter block for a strided kernel over `numel` elements with up to four operands.
pub(crate) fn strided_params(strided: &Strided, numel: usize, row: u32) -> Vec<u32> {
    let mut p = vec![0u32; slot::SPAN + 1];
    p[slot::NUMEL] = numel as u32;
    p[slot::RANK] = strided.dims.len() as u32;
    p[slot::ROW] = row;
    for (axis, &size) in strided.dims.iter().enumerate() {
        p[slot::DIMS + axis] = size as u32;
    }
    for (k, strides) in strided.strides.iter().enumerate() {
        for (axis, &stride) in strides.iter().enumerate() {
            p[slot::STRIDES + 8 * k + axis] = stride as u32;
        }
        p[slot::OFFSETS + k] = strided.offsets[k] as u32;
    }
    p
}

/// The parameters and grid of a kernel whose threads each handle several elements, a launch
/// apart (`SPAN` in elementwise.wgsl).
pub(crate) fn spread_params(strided: &Strided, numel: usize) -> (Vec<u32>, [u32; 3]) {
    let (groups, row, span) = super::batch::grid_spread(numel);
    let mut p = strided_params(strided, numel, row);
    p[slot::SPAN] = span;
    (p, groups)
}
