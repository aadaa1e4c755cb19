//! The GPU types when rumus is built without its `gpu` feature: they have no values, so every
//! GPU branch is statically unreachable and `Device::gpu()` explains how to get one.

use std::convert::Infallible;

use crate::backend::cpu::CpuBuffer;
use crate::dtype::DType;
use crate::error::{DeviceError, Result};

/// A GPU; without the `gpu` feature none can exist.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuDevice(Infallible);

impl GpuDevice {
    /// Always [`DeviceError::NotCompiled`], whose message says to enable the `gpu` feature.
    pub fn default_adapter() -> Result<GpuDevice> {
        Err(DeviceError::NotCompiled.into())
    }

    /// The adapter's name (unreachable: no `GpuDevice` exists).
    pub fn name(&self) -> &str {
        match self.0 {}
    }

    /// Waits for queued kernels (unreachable: no `GpuDevice` exists).
    pub fn synchronize(&self) -> Result<()> {
        match self.0 {}
    }

    pub(crate) fn never(&self) -> ! {
        match self.0 {}
    }

    /// A host element as a one-element buffer (unreachable: no `GpuDevice` exists).
    pub(crate) fn constant(&self, _: &CpuBuffer, _: usize) -> Result<std::sync::Arc<GpuBuffer>> {
        self.never()
    }
}

/// Every kernel refuses by the contract's defaults; none can be reached, since no
/// `GpuBuffer` exists to dispatch on.
impl crate::backend::Backend for GpuDevice {
    type Memory = GpuBuffer;

    fn name(&self) -> &'static str {
        "wgpu (not compiled)"
    }
}

crate::backend::refuse_every_kernel!(GpuDevice);

impl crate::backend::Int8 for GpuDevice {
    type Int8Weights = Infallible;

    fn upload_int8(&self, _: &crate::backend::kinds::Int8Matrix<'_>) -> Result<Infallible> {
        self.never()
    }
}

impl crate::backend::BackendMemory for GpuBuffer {
    fn dtype(&self) -> DType {
        match self.0 {}
    }

    fn len(&self) -> usize {
        match self.0 {}
    }
}

pub(crate) fn download_asked(buffer: &GpuBuffer, _: std::ops::Range<usize>) -> Result<CpuBuffer> {
    match buffer.0 {}
}

pub(crate) fn upload_buffer(device: &GpuDevice, _: &CpuBuffer) -> Result<GpuBuffer> {
    device.never()
}

/// GPU memory; without the `gpu` feature none can exist.
#[derive(Debug)]
pub struct GpuBuffer(Infallible);

impl GpuBuffer {
    /// Number of elements (unreachable: no `GpuBuffer` exists).
    pub fn len(&self) -> usize {
        match self.0 {}
    }

    /// Whether it holds no elements (unreachable: no `GpuBuffer` exists).
    pub fn is_empty(&self) -> bool {
        match self.0 {}
    }

    /// Element type (unreachable: no `GpuBuffer` exists).
    pub fn dtype(&self) -> DType {
        match self.0 {}
    }

    /// The device holding it (unreachable: no `GpuBuffer` exists).
    pub fn device(&self) -> GpuDevice {
        match self.0 {}
    }

    pub(crate) fn read_back_fallback(&self) -> Result<CpuBuffer> {
        match self.0 {}
    }
}
