//! Tensor memory. A [`Storage`] is shared by every view of it through an `Arc`; its version
//! counter goes up on each in-place write so the tape can refuse stale saved tensors.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::dtype::DType;

/// Host memory of one dtype.
#[derive(Debug, Clone)]
pub enum CpuBuffer {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

impl CpuBuffer {
    pub fn dtype(&self) -> DType {
        match self {
            CpuBuffer::F32(_) => DType::F32,
            CpuBuffer::F64(_) => DType::F64,
            CpuBuffer::I64(_) => DType::I64,
            CpuBuffer::Bool(_) => DType::Bool,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            CpuBuffer::F32(v) => v.len(),
            CpuBuffer::F64(v) => v.len(),
            CpuBuffer::I64(v) => v.len(),
            CpuBuffer::Bool(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Builds a buffer of the same dtype by running `$body` on the typed vector `$values`
/// (the body is instantiated once per dtype).
macro_rules! map_buffer {
    ($buffer:expr, |$values:ident| $body:expr) => {
        match $buffer {
            $crate::storage::CpuBuffer::F32($values) => $crate::storage::CpuBuffer::F32($body),
            $crate::storage::CpuBuffer::F64($values) => $crate::storage::CpuBuffer::F64($body),
            $crate::storage::CpuBuffer::I64($values) => $crate::storage::CpuBuffer::I64($body),
            $crate::storage::CpuBuffer::Bool($values) => $crate::storage::CpuBuffer::Bool($body),
        }
    };
}
pub(crate) use map_buffer;

static LIVE_STORAGE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Bytes held by all live tensor storages of this process. Tests use it to prove that
/// forward passes which are never back-propagated release their memory.
pub fn live_storage_bytes() -> usize {
    LIVE_STORAGE_BYTES.load(Ordering::Relaxed)
}

/// Reference-counted tensor memory with a version counter.
#[derive(Debug)]
pub struct Storage {
    buffer: RwLock<CpuBuffer>,
    version: AtomicU64,
    dtype: DType,
    bytes: usize,
}

impl Storage {
    pub fn new(buffer: CpuBuffer) -> Self {
        let dtype = buffer.dtype();
        let bytes = buffer.len() * dtype.size_in_bytes();
        LIVE_STORAGE_BYTES.fetch_add(bytes, Ordering::Relaxed);
        Storage {
            buffer: RwLock::new(buffer),
            version: AtomicU64::new(0),
            dtype,
            bytes,
        }
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn read(&self) -> RwLockReadGuard<'_, CpuBuffer> {
        self.buffer
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Write access; bumps the version so saved copies of this memory become stale.
    pub fn write(&self) -> RwLockWriteGuard<'_, CpuBuffer> {
        self.version.fetch_add(1, Ordering::AcqRel);
        self.buffer
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        LIVE_STORAGE_BYTES.fetch_sub(self.bytes, Ordering::Relaxed);
        if self.bytes >= crate::backend::cpu::pool::MIN_POOLED_BYTES {
            let buffer = self
                .buffer
                .get_mut()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let empty = CpuBuffer::Bool(Vec::new());
            crate::backend::cpu::pool::recycle(std::mem::replace(buffer, empty));
        }
    }
}
