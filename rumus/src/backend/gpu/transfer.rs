//! Copies between host and GPU memory, and their counters.
//!
//! Transfers a program asks for (`.to(&device)`, `to_vec`, `item`) are counted as explicit;
//! a GPU tensor read back because a host-only path met it (writing a checkpoint, a state
//! dict copy) is counted as a fallback, so a test can prove that a training step stays on
//! the device (`transfer_counts().fallback == 0`).

use std::sync::atomic::{AtomicU64, Ordering};

use super::context::{GpuDevice, gpu_error};
use super::memory::{GpuBuffer, WORD};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::storage::CpuBuffer;

static UPLOADS: AtomicU64 = AtomicU64::new(0);
static DOWNLOADS: AtomicU64 = AtomicU64::new(0);
static FALLBACK_DOWNLOADS: AtomicU64 = AtomicU64::new(0);

/// Host/GPU copies made by this process so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransferCounts {
    /// Host-to-GPU copies the program asked for.
    pub uploads: u64,
    /// GPU-to-host copies the program asked for.
    pub downloads: u64,
    /// GPU-to-host copies made because a host-only path read a GPU tensor.
    pub fallback: u64,
}

/// The counters so far (process-wide; compare two readings around the code of interest).
pub fn transfer_counts() -> TransferCounts {
    TransferCounts {
        uploads: UPLOADS.load(Ordering::Relaxed),
        downloads: DOWNLOADS.load(Ordering::Relaxed),
        fallback: FALLBACK_DOWNLOADS.load(Ordering::Relaxed),
    }
}

/// Why a copy is made, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    Asked,
    Fallback,
}

fn words_of(buffer: &CpuBuffer, op: &'static str) -> Result<Vec<u32>> {
    Ok(match buffer {
        CpuBuffer::F32(v) => bytemuck::cast_slice(v).to_vec(),
        CpuBuffer::I64(v) => {
            v.iter()
                .map(|&x| {
                    i32::try_from(x).map(|x| x as u32).map_err(|_| Error::InvalidArgument {
                    op,
                    message: format!(
                        "the i64 value {x} does not fit the GPU's 32-bit integers (-2^31..2^31)"
                    ),
                })
                })
                .collect::<Result<_>>()?
        }
        CpuBuffer::Bool(v) => v.iter().map(|&b| u32::from(b)).collect(),
        // Two halves per word, the first element in the low half; an odd tail pads with 0.
        CpuBuffer::F16(v) => v
            .chunks(2)
            .map(|pair| {
                let high = pair.get(1).map_or(0, |h| h.to_bits());
                u32::from(pair[0].to_bits()) | (u32::from(high) << 16)
            })
            .collect(),
        CpuBuffer::F64(_) | CpuBuffer::BF16(_) => {
            return Err(crate::error::DeviceError::UnsupportedDType {
                op,
                dtype: buffer.dtype(),
            }
            .into());
        }
    })
}

/// Copies `buffer` (row-major elements) into a new GPU buffer.
pub(crate) fn upload(device: &GpuDevice, buffer: &CpuBuffer) -> Result<GpuBuffer> {
    let words = words_of(buffer, "upload to the GPU")?;
    let out = GpuBuffer::uninit(device, buffer.len(), buffer.dtype(), "upload to the GPU")?;
    // The buffer may come from the pool while queued kernels still read its old contents:
    // submit them first, so the write lands after them in queue order.
    device.submit();
    if !words.is_empty() {
        device
            .0
            .queue
            .write_buffer(out.raw(), 0, bytemuck::cast_slice(&words));
    }
    UPLOADS.fetch_add(1, Ordering::Relaxed);
    Ok(out)
}

fn count(reason: Reason, asked: &AtomicU64, fallback: &AtomicU64) {
    let counter = match reason {
        Reason::Asked => asked,
        Reason::Fallback => fallback,
    };
    counter.fetch_add(1, Ordering::Relaxed);
}

/// Reads elements `range` of `buffer` back to the host (waits for queued kernels).
pub(crate) fn download(
    buffer: &GpuBuffer,
    range: std::ops::Range<usize>,
    reason: Reason,
) -> Result<CpuBuffer> {
    let device = buffer.device();
    let ctx = &device.0;
    let dtype = buffer.dtype();
    count(reason, &DOWNLOADS, &FALLBACK_DOWNLOADS);
    if range.is_empty() {
        return Ok(from_words(&[], dtype, 0..0));
    }
    // The whole words that hold the range (an f16 range may start or end mid-word).
    let (first_word, end_word) = if dtype == DType::F16 {
        (range.start / 2, range.end.div_ceil(2))
    } else {
        (range.start, range.end)
    };
    let bytes = (end_word - first_word) as u64 * WORD;
    let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let staging = ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("rumus readback"),
        size: bytes,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    if let Some(error) = pollster::block_on(scope.pop()) {
        return Err(crate::Error::OutOfMemory {
            op: "reading a GPU tensor back".to_string(),
            message: format!("{bytes} bytes of host-visible memory: {error}"),
        });
    }
    let start = first_word as u64 * WORD;
    device.with_encoder(|encoder| {
        encoder.copy_buffer_to_buffer(buffer.raw(), start, &staging, 0, bytes)
    });
    device.submit();
    let (sender, receiver) = std::sync::mpsc::channel();
    staging
        .slice(..)
        .map_async(wgpu::MapMode::Read, move |result| {
            let _ = sender.send(result);
        });
    device.wait_for_queue("a readback")?;
    // The copy is done, so the mapping's callback has run, or is about to on another thread
    // whose poll took it; within the wait limit, not forever.
    let mapped = match device.wait_timeout() {
        Some(limit) => receiver.recv_timeout(limit).map_err(|e| e.to_string()),
        None => receiver.recv().map_err(|e| e.to_string()),
    };
    device.check_faults()?;
    mapped
        .map_err(|e| gpu_error(format!("the readback was not mapped: {e}")))?
        .map_err(|e| gpu_error(format!("mapping the readback failed: {e}")))?;
    let words: Vec<u32> = {
        let view = staging
            .slice(..)
            .get_mapped_range()
            .map_err(|e| gpu_error(format!("reading the readback failed: {e}")))?;
        bytemuck::cast_slice(&view).to_vec()
    };
    staging.unmap();
    let skip = range.start - first_word * if dtype == DType::F16 { 2 } else { 1 };
    Ok(from_words(&words, dtype, skip..skip + range.len()))
}

/// The elements `within` the elements that `words` hold.
fn from_words(words: &[u32], dtype: DType, within: std::ops::Range<usize>) -> CpuBuffer {
    if dtype != DType::F16 {
        debug_assert_eq!(within, 0..words.len());
    }
    match dtype {
        DType::F16 => CpuBuffer::F16(
            words
                .iter()
                .flat_map(|&w| [w as u16, (w >> 16) as u16])
                .skip(within.start)
                .take(within.len())
                .map(half::f16::from_bits)
                .collect(),
        ),
        DType::F32 => CpuBuffer::F32(bytemuck::cast_slice(words).to_vec()),
        DType::I64 => CpuBuffer::I64(words.iter().map(|&w| i64::from(w as i32)).collect()),
        DType::Bool => CpuBuffer::Bool(words.iter().map(|&w| w != 0).collect()),
        DType::F64 | DType::BF16 => {
            unreachable!("f64 and bf16 never reach the GPU (checked on upload)")
        }
    }
}

impl GpuBuffer {
    /// The elements on the host, for a host-only path that met a GPU tensor (counted).
    pub(crate) fn read_back_fallback(&self) -> Result<CpuBuffer> {
        download(self, 0..self.len(), Reason::Fallback)
    }
}

/// A download the program asked for (`to_vec`, `.to(&Device::Cpu)`).
/// Elements `range` of `buffer`, because the program asked for them.
pub(crate) fn download_asked(
    buffer: &GpuBuffer,
    range: std::ops::Range<usize>,
) -> Result<CpuBuffer> {
    download(buffer, range, Reason::Asked)
}

