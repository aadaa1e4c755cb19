//! Device memory: one allocation per buffer from the device's stream-ordered pool, returned
//! to the pool (not to the driver) when the buffer drops.

use cudarc::driver::{result, sys};

use super::context::{CudaDevice, cuda_error};
use crate::dtype::DType;
use crate::error::{DeviceError, Result};

/// Elements of one dtype in the memory of a CUDA device.
pub struct CudaBuffer {
    /// The allocation's device address (0 for an empty buffer, which allocates nothing).
    ptr: sys::CUdeviceptr,
    len: usize,
    dtype: DType,
    device: CudaDevice,
}

impl std::fmt::Debug for CudaBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CudaBuffer({} x {}, {:?})", self.len, self.dtype, self.device)
    }
}

impl CudaBuffer {
    /// `len` elements of `dtype`, not yet written: every kernel writes all of its output.
    /// Allocation is ordered on the device's stream, so the memory may be one a queued
    /// kernel still reads and has just freed.
    pub(crate) fn uninit(device: &CudaDevice, len: usize, dtype: DType) -> Result<CudaBuffer> {
        let Some(bytes) = len
            .checked_mul(dtype.size_in_bytes())
            .filter(|&bytes| bytes <= isize::MAX as usize)
        else {
            return Err(DeviceError::Cuda {
                message: format!(
                    "{len} elements of {dtype} are more bytes than any memory holds; split the work into smaller tensors"
                ),
            }
            .into());
        };
        let ptr = if bytes == 0 {
            0
        } else {
            device.bind()?;
            // SAFETY: the stream is the device's own and lives as long as the context.
            match unsafe { result::malloc_async(device.raw_stream(), bytes) } {
                Ok(ptr) => ptr,
                Err(first) => {
                    // Freed memory may still be queued for release: wait, hand the pool's
                    // spare memory back, and try once more.
                    device.synchronize()?;
                    // SAFETY: as above.
                    unsafe { result::malloc_async(device.raw_stream(), bytes) }.map_err(|_| {
                        let free = device.0.ctx.mem_get_info().map_or(0, |(free, _)| free);
                        cuda_error(
                            &format!(
                                "allocating {bytes} bytes on {} ({free} bytes free); use smaller batches or tensors",
                                device.name()
                            ),
                            first,
                        )
                    })?
                }
            }
        };
        Ok(CudaBuffer {
            ptr,
            len,
            dtype,
            device: device.clone(),
        })
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The device holding the memory.
    pub fn device(&self) -> CudaDevice {
        self.device.clone()
    }

    /// The device address of element `index` (a kernel argument).
    pub(crate) fn address(&self, index: usize) -> sys::CUdeviceptr {
        self.ptr + (index * self.dtype.size_in_bytes()) as u64
    }
}

impl Drop for CudaBuffer {
    fn drop(&mut self) {
        if self.ptr == 0 || self.device.bind().is_err() {
            return;
        }
        // SAFETY: the allocation came from this stream's pool and every kernel that reads it
        // was queued on the same stream before this free. A failure here (a lost device) has
        // no one to report to; the memory goes with the context.
        let _ = unsafe { result::free_async(self.ptr, self.device.raw_stream()) };
    }
}

impl crate::backend::BackendMemory for CudaBuffer {
    fn dtype(&self) -> DType {
        self.dtype
    }

    fn len(&self) -> usize {
        self.len
    }
}
