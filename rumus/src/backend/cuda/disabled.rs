//! The CUDA types when rumus is built without its `cuda` feature: they have no values, so
//! every CUDA branch is statically unreachable and `Device::cuda()` explains how to get one.

use std::convert::Infallible;
use std::sync::Arc;

use crate::backend::cpu::CpuBuffer;
use crate::dtype::DType;
use crate::error::{DeviceError, Result};

/// A CUDA device; without the `cuda` feature none can exist.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaDevice(Infallible);

impl CudaDevice {
    /// Always [`DeviceError::CudaNotCompiled`], whose message says to enable the feature.
    pub fn open(_ordinal: usize) -> Result<CudaDevice> {
        Err(DeviceError::CudaNotCompiled.into())
    }

    /// The device's name (unreachable: no `CudaDevice` exists).
    pub fn name(&self) -> &str {
        match self.0 {}
    }

    /// The device's ordinal (unreachable: no `CudaDevice` exists).
    pub fn ordinal(&self) -> usize {
        match self.0 {}
    }

    /// Waits for queued kernels (unreachable: no `CudaDevice` exists).
    pub fn synchronize(&self) -> Result<()> {
        match self.0 {}
    }

    /// Starts or stops timing kernels (unreachable: no `CudaDevice` exists).
    pub fn profile_kernels(&self, _on: bool) -> Result<()> {
        match self.0 {}
    }

    /// The GPU time of each kernel (unreachable: no `CudaDevice` exists).
    pub fn kernel_times(&self) -> Result<Vec<(String, crate::backend::KernelTime)>> {
        match self.0 {}
    }

    pub(crate) fn constant(&self, _: &CpuBuffer, _: usize) -> Result<Arc<CudaBuffer>> {
        match self.0 {}
    }
}

/// CUDA memory; without the `cuda` feature none can exist.
#[derive(Debug)]
pub struct CudaBuffer(Infallible);

impl CudaBuffer {
    /// Number of elements (unreachable: no `CudaBuffer` exists).
    pub fn len(&self) -> usize {
        match self.0 {}
    }

    /// Whether it holds no elements (unreachable: no `CudaBuffer` exists).
    pub fn is_empty(&self) -> bool {
        match self.0 {}
    }

    /// Element type (unreachable: no `CudaBuffer` exists).
    pub fn dtype(&self) -> DType {
        match self.0 {}
    }

    /// The device holding it (unreachable: no `CudaBuffer` exists).
    pub fn device(&self) -> CudaDevice {
        match self.0 {}
    }
}

impl crate::backend::BackendMemory for CudaBuffer {
    fn dtype(&self) -> DType {
        match self.0 {}
    }

    fn len(&self) -> usize {
        match self.0 {}
    }
}

pub(crate) fn download(buffer: &CudaBuffer, _: std::ops::Range<usize>) -> Result<CpuBuffer> {
    match buffer.0 {}
}

pub(crate) fn upload(device: &CudaDevice, _: &CpuBuffer) -> Result<CudaBuffer> {
    match device.0 {}
}

/// Every kernel refuses by the contract's defaults; none can be reached, since no
/// `CudaBuffer` exists to dispatch on.
impl crate::backend::Backend for CudaDevice {
    type Memory = CudaBuffer;

    fn name(&self) -> &'static str {
        "cuda (not compiled)"
    }
}

crate::backend::refuse_every_kernel!(CudaDevice);

impl crate::backend::Int8 for CudaDevice {
    type Int8Weights = Infallible;

    fn upload_int8(&self, _: &crate::backend::kinds::Int8Matrix<'_>) -> Result<Infallible> {
        match self.0 {}
    }
}
