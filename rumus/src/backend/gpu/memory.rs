//! Device memory: tensor buffers and the pool they return to.
//!
//! Every GPU element is one 32-bit word (`f32`, `i64` stored as `i32`, `bool` as `u32`), so
//! every kernel reads `array<u32>` and bit-casts; `f16` packs two elements per word (element
//! `2w` in the low half of word `w`, as WGSL's `unpack2x16float` reads them), and only the
//! kernels that know it (casts, copies, matrix products) accept it. Freed buffers go back to a pool keyed by
//! size class and are handed to the next output of that class; a training step allocates the
//! same sizes every iteration, so after the first step it allocates nothing. Reusing a buffer
//! is safe without waiting for the GPU: kernels run in the order they were queued, and uploads
//! submit queued work first (see `transfer`).

use std::collections::HashMap;

use super::context::GpuDevice;
use crate::dtype::DType;
use crate::error::{DeviceError, Error, Result};

/// Bytes of one element on the GPU.
pub(crate) const WORD: u64 = 4;
/// 32-bit words that hold `len` elements of `dtype`.
pub(crate) fn words(len: usize, dtype: DType) -> usize {
    if dtype == DType::F16 {
        len.div_ceil(2)
    } else {
        len
    }
}

/// Free buffers the pool always may keep. It keeps as many as the program once held in use
/// at the same time, when that is more (an allocation the device refuses for lack of memory
/// empties the pool and tries again): a training step whose activations outgrow a fixed
/// cap would destroy them at the end of each backward pass and create them again in the
/// next forward pass (GPT-2 small at batch 8 x 1,024 holds ~20 GB; with a 4 GiB cap its step
/// took 1.0 s of wall time for 0.2 s of kernels, and with the pool capped at the difference
/// between that peak and what is in use, 0.42 s, creating 180 buffers a step).
const MAX_POOLED_BYTES: u64 = 4 << 30;

/// Memory accounting of one GPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes of buffers held by live tensors.
    pub in_use: u64,
    /// Bytes of free buffers kept for reuse.
    pub pooled: u64,
    /// The most `in_use + pooled` has ever been.
    pub peak: u64,
    /// The most `in_use` has ever been (PyTorch's `max_memory_allocated`).
    pub in_use_peak: u64,
    /// Buffers created so far (a steady training loop stops creating them).
    pub created: u64,
}

#[derive(Default)]
pub(crate) struct BufferPool {
    free: HashMap<u64, Vec<wgpu::Buffer>>,
    order: Vec<u64>,
    stats: MemoryStats,
}

/// The size a request is rounded up to: powers of two up to 1 MiB, whole MiB above.
fn size_class(bytes: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    if bytes <= MIB {
        bytes.next_power_of_two().max(256)
    } else {
        bytes.div_ceil(MIB) * MIB
    }
}

impl BufferPool {
    pub fn stats(&self) -> MemoryStats {
        self.stats
    }

    pub fn release(&mut self) {
        self.free.clear();
        self.order.clear();
        self.stats.pooled = 0;
    }

    /// Counts `class` bytes more in use.
    fn count_in_use(&mut self, class: u64) {
        self.stats.in_use += class;
        self.stats.in_use_peak = self.stats.in_use_peak.max(self.stats.in_use);
    }

    pub fn reset_peak(&mut self) {
        self.stats.peak = self.stats.in_use + self.stats.pooled;
        self.stats.in_use_peak = self.stats.in_use;
    }

    fn take(&mut self, class: u64) -> Option<wgpu::Buffer> {
        let buffer = self.free.get_mut(&class)?.pop()?;
        if let Some(at) = self.order.iter().rposition(|&c| c == class) {
            self.order.remove(at);
        }
        self.stats.pooled -= class;
        self.count_in_use(class);
        Some(buffer)
    }

    fn give_back(&mut self, buffer: wgpu::Buffer) {
        let class = buffer.size();
        self.stats.in_use -= class;
        self.stats.pooled += class;
        self.free.entry(class).or_default().push(buffer);
        self.order.push(class);
        let limit = MAX_POOLED_BYTES.max(self.stats.in_use_peak);
        while self.stats.pooled > limit && !self.order.is_empty() {
            let oldest = self.order.remove(0);
            if let Some(dropped) = self
                .free
                .get_mut(&oldest)
                .and_then(|shelf| (!shelf.is_empty()).then(|| shelf.remove(0)))
            {
                self.stats.pooled -= dropped.size();
            }
        }
    }
}

/// A new buffer of `class` bytes, or `None` when the device is out of memory.
fn create(device: &GpuDevice, op: &'static str, class: u64) -> Option<wgpu::Buffer> {
    let scope = device.0.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let buffer = device.0.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(op),
        size: class,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    pollster::block_on(scope.pop()).is_none().then_some(buffer)
}

/// A tensor's elements on a GPU. Dropping it returns the buffer to the device's pool.
pub struct GpuBuffer {
    raw: Option<wgpu::Buffer>,
    len: usize,
    dtype: DType,
    device: GpuDevice,
}

impl std::fmt::Debug for GpuBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GpuBuffer({} x {} on {})",
            self.len,
            self.dtype,
            self.device.name()
        )
    }
}

/// A wgpu device: memory in its buffers, kernels in WGSL (one file per family under
/// `shaders/`, launched from this module's files of the same names).
impl crate::backend::Backend for GpuDevice {
    type Memory = GpuBuffer;

    fn name(&self) -> &'static str {
        "wgpu"
    }
}

impl crate::backend::BackendMemory for GpuBuffer {
    fn dtype(&self) -> DType {
        GpuBuffer::dtype(self)
    }

    fn len(&self) -> usize {
        GpuBuffer::len(self)
    }
}

impl GpuBuffer {
    /// Room for `len` elements of `dtype`; old contents are undefined (kernels overwrite).
    pub(crate) fn uninit(
        device: &GpuDevice,
        len: usize,
        dtype: DType,
        op: &'static str,
    ) -> Result<Self> {
        check_dtype(dtype, op)?;
        device.check_faults()?;
        // Saturating: a count past any device's binding limit is refused just below.
        let bytes = (words(len, dtype) as u64).max(1).saturating_mul(WORD);
        let limit = device.max_binding_bytes();
        if bytes > limit {
            return Err(DeviceError::TooLarge { op, bytes, limit }.into());
        }
        let class = size_class(bytes).min(limit.max(bytes));
        let pooled = device
            .0
            .pool
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take(class);
        let raw = match pooled {
            Some(buffer) => buffer,
            None => {
                let buffer = match create(device, op, class) {
                    Some(buffer) => buffer,
                    None => {
                        // Out of device memory: give the pool's free buffers back (their
                        // memory returns once the queued work that used them is done) and
                        // try once more, as PyTorch's caching allocator does.
                        device.release_pooled();
                        device.synchronize()?;
                        create(device, op, class).ok_or_else(|| Error::OutOfMemory {
                            op: op.to_string(),
                            message: format!(
                                "the GPU could not allocate {class} more bytes ({} held by \
                                 live tensors)",
                                device.memory().in_use
                            ),
                        })?
                    }
                };
                let mut pool = device.0.pool.lock().unwrap_or_else(|p| p.into_inner());
                pool.count_in_use(class);
                pool.stats.created += 1;
                pool.stats.peak = pool.stats.peak.max(pool.stats.in_use + pool.stats.pooled);
                buffer
            }
        };
        Ok(GpuBuffer {
            raw: Some(raw),
            len,
            dtype,
            device: device.clone(),
        })
    }

    /// Number of elements (not bytes) the buffer holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Element type of the buffer.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The device the buffer lives on (a cheap handle clone).
    pub fn device(&self) -> GpuDevice {
        self.device.clone()
    }

    pub(crate) fn raw(&self) -> &wgpu::Buffer {
        self.raw.as_ref().expect("present until drop")
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            self.device
                .0
                .pool
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .give_back(raw);
        }
    }
}

/// Kernels that read one element per word take every dtype the GPU stores but packed `f16`.
pub(crate) fn check_words(dtype: DType, op: &'static str) -> Result<()> {
    check_dtype(dtype, op)?;
    if dtype == DType::F16 {
        return Err(crate::Error::DType {
            op,
            expected: "an f32, i64 or bool tensor",
            found: dtype,
        });
    }
    Ok(())
}

/// GPU kernels work on 32-bit words: `f64` has no portable WGSL type, and WGSL has no
/// bfloat16 (the CPU and CUDA have both).
pub(crate) fn check_dtype(dtype: DType, op: &'static str) -> Result<()> {
    if matches!(dtype, DType::F64 | DType::BF16) {
        return Err(DeviceError::UnsupportedDType { op, dtype }.into());
    }
    Ok(())
}
