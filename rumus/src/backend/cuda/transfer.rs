//! Copies between host memory and a CUDA device: uploads queue on the device's stream and
//! return once the driver has staged the host elements; downloads wait for the stream.

use cudarc::driver::result;

use super::context::{CudaDevice, cuda_error};
use super::memory::CudaBuffer;
use crate::backend::cpu::CpuBuffer;
use crate::dtype::DType;
use crate::error::Result;

/// The host elements as bytes (every element type is plain data; `bool` is one byte, 0 or 1,
/// as the device stores it).
fn host_bytes(host: &CpuBuffer) -> &[u8] {
    fn bytes<T>(values: &[T]) -> &[u8] {
        // SAFETY: f32, f64, half::f16, half::bf16, i64 and bool have no padding and every byte of them
        // is initialised; the slice covers exactly their memory.
        unsafe { std::slice::from_raw_parts(values.as_ptr().cast(), std::mem::size_of_val(values)) }
    }
    match host {
        CpuBuffer::F32(v) => bytes(v),
        CpuBuffer::F64(v) => bytes(v),
        CpuBuffer::F16(v) => bytes(v),
        CpuBuffer::BF16(v) => bytes(v),
        CpuBuffer::I64(v) => bytes(v),
        CpuBuffer::Bool(v) => bytes(v),
    }
}

/// `host` copied to `device`.
pub(crate) fn upload(device: &CudaDevice, host: &CpuBuffer) -> Result<CudaBuffer> {
    let buffer = CudaBuffer::uninit(device, host.len(), host.dtype())?;
    let bytes = host_bytes(host);
    if !bytes.is_empty() {
        // SAFETY: the buffer holds exactly `bytes.len()` bytes; from pageable memory the
        // driver stages the elements before returning, so `host` may go afterwards.
        unsafe { result::memcpy_htod_async(buffer.address(0), bytes, device.raw_stream()) }
            .map_err(|e| cuda_error("copying to the device", e))?;
    }
    Ok(buffer)
}

/// Elements `range` of `buffer`, read back to the host (waits for the kernels queued
/// before).
pub(crate) fn download(buffer: &CudaBuffer, range: std::ops::Range<usize>) -> Result<CpuBuffer> {
    fn read<T: Clone + Default>(buffer: &CudaBuffer, range: std::ops::Range<usize>) -> Result<Vec<T>> {
        let mut host = vec![T::default(); range.len()];
        if host.is_empty() {
            return Ok(host);
        }
        let device = buffer.device();
        device.bind()?;
        // SAFETY: the range lies inside the buffer (callers pass views of it) and `host`
        // holds as many elements of the same width; the stream is waited for before `host`
        // is read.
        unsafe {
            result::memcpy_dtoh_async(&mut host, buffer.address(range.start), device.raw_stream())
        }
        .map_err(|e| cuda_error("copying from the device", e))?;
        device.synchronize()?;
        Ok(host)
    }
    Ok(match buffer.dtype() {
        DType::F32 => CpuBuffer::F32(read(buffer, range)?),
        DType::F64 => CpuBuffer::F64(read(buffer, range)?),
        DType::F16 => CpuBuffer::F16(read(buffer, range)?),
        DType::BF16 => CpuBuffer::BF16(read(buffer, range)?),
        DType::I64 => CpuBuffer::I64(read(buffer, range)?),
        DType::Bool => CpuBuffer::Bool(
            read::<u8>(buffer, range)?
                .into_iter()
                .map(|b| b != 0)
                .collect(),
        ),
    })
}
