//! Reuse of large float buffers between ops.
//!
//! Every op writes a fresh output. For small outputs the allocator reuses freed memory by
//! itself, but glibc hands large blocks (above its mmap threshold) back to the kernel on free
//! and maps fresh pages for the next one, so every large output pays one page fault per 4 KiB
//! on first touch. Measured on the 2-core dev box: the im2col columns of a 3x3 convolution
//! over `[64, 32, 28, 28]` (58 MB) took 33 ms to write, 7 ms into reused memory; a training
//! step allocates the same sizes every iteration, so the pool hits almost always.
//!
//! Storages give their `f32`/`f64` buffers of at least [`MIN_POOLED_BYTES`] back when they
//! drop; kernels take from the pool with [`filled`] (cleared) or [`reused`] (old values,
//! for kernels that overwrite every element). At most [`MAX_POOLED_BYTES`] are kept; the
//! oldest buffers go first. [`pooled_bytes`] reports what is held, [`release`] frees it.

use std::any::TypeId;
use std::mem::ManuallyDrop;
use std::sync::Mutex;

use crate::storage::CpuBuffer;

/// Smaller buffers are left to the allocator.
pub const MIN_POOLED_BYTES: usize = 256 * 1024;
/// Most memory the pool keeps for reuse.
pub const MAX_POOLED_BYTES: usize = 1 << 30;

#[derive(Default)]
struct Pool {
    f32: Vec<Vec<f32>>,
    f64: Vec<Vec<f64>>,
    bytes: usize,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    f32: Vec::new(),
    f64: Vec::new(),
    bytes: 0,
});

fn lock() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A buffer of `len` elements or more from `shelf`, not more than a quarter larger (a huge
/// buffer is not spent on a small request).
fn take_from<T>(shelf: &mut Vec<Vec<T>>, len: usize) -> Option<Vec<T>> {
    let fits = |v: &Vec<T>| v.capacity() >= len && v.capacity() <= len + len / 4;
    let position = shelf.iter().rposition(fits)?;
    Some(shelf.swap_remove(position))
}

/// Reinterprets `Vec<A>` as `Vec<B>`; the caller checked that `A` and `B` are the same type.
fn same_type<A: 'static, B: 'static>(v: Vec<A>) -> Vec<B> {
    assert_eq!(TypeId::of::<A>(), TypeId::of::<B>());
    let mut v = ManuallyDrop::new(v);
    // SAFETY: `A` and `B` are the same type (checked above), so pointer, length and capacity
    // describe a valid `Vec<B>` from the same allocation.
    unsafe { Vec::from_raw_parts(v.as_mut_ptr().cast::<B>(), v.len(), v.capacity()) }
}

/// A pooled buffer with room for `len` values of `T`, if `T` is pooled and one is free.
fn take<T: Copy + 'static>(len: usize) -> Option<Vec<T>> {
    let bytes = len.checked_mul(std::mem::size_of::<T>())?;
    if bytes < MIN_POOLED_BYTES {
        return None;
    }
    let mut pool = lock();
    let found = if TypeId::of::<T>() == TypeId::of::<f32>() {
        take_from(&mut pool.f32, len).map(same_type::<f32, T>)
    } else if TypeId::of::<T>() == TypeId::of::<f64>() {
        take_from(&mut pool.f64, len).map(same_type::<f64, T>)
    } else {
        None
    };
    if let Some(v) = &found {
        pool.bytes -= v.capacity() * std::mem::size_of::<T>();
    }
    found
}

/// `len` copies of `value` (zero, usually), in reused memory when possible.
pub fn filled<T: Copy + 'static>(len: usize, value: T) -> Vec<T> {
    pooled_filled(len, value).unwrap_or_else(|| vec![value; len])
}

/// `len` copies of `value` in a pooled buffer, or `None` when none is free (the caller then
/// allocates, fallibly if it wants).
pub fn pooled_filled<T: Copy + 'static>(len: usize, value: T) -> Option<Vec<T>> {
    let mut v = take::<T>(len)?;
    v.clear();
    v.resize(len, value);
    Some(v)
}

/// `len` initialised values with unspecified contents (earlier results), for kernels that
/// write every element; a fresh buffer holds `fill`.
pub fn reused<T: Copy + 'static>(len: usize, fill: T) -> Vec<T> {
    match take::<T>(len) {
        Some(mut v) => {
            v.truncate(len);
            v.resize(len, fill);
            v
        }
        None => vec![fill; len],
    }
}

/// Keeps `buffer` for reuse when it is a large float buffer; frees it otherwise.
pub fn recycle(buffer: CpuBuffer) {
    let bytes = buffer.len() * buffer.dtype().size_in_bytes();
    if !(MIN_POOLED_BYTES..=MAX_POOLED_BYTES).contains(&bytes) {
        return;
    }
    let mut pool = lock();
    let pool = &mut *pool;
    match buffer {
        CpuBuffer::F32(v) => {
            pool.bytes += v.capacity() * 4;
            pool.f32.push(v);
        }
        CpuBuffer::F64(v) => {
            pool.bytes += v.capacity() * 8;
            pool.f64.push(v);
        }
        CpuBuffer::F16(_) | CpuBuffer::BF16(_) | CpuBuffer::I64(_) | CpuBuffer::Bool(_) => return,
    }
    // Over budget: drop the oldest buffers, alternating between the shelves.
    while pool.bytes > MAX_POOLED_BYTES {
        let freed = if pool.f32.len() >= pool.f64.len() && !pool.f32.is_empty() {
            pool.f32.remove(0).capacity() * 4
        } else if !pool.f64.is_empty() {
            pool.f64.remove(0).capacity() * 8
        } else {
            break;
        };
        pool.bytes -= freed;
    }
}

/// Bytes held for reuse (not counted by [`live_storage_bytes`](crate::storage::live_storage_bytes)).
pub fn pooled_bytes() -> usize {
    lock().bytes
}

/// Frees every pooled buffer (e.g. after training, before a memory-hungry phase).
pub fn release() {
    let mut pool = lock();
    *pool = Pool::default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_come_back_cleared_or_reused() {
        let len = MIN_POOLED_BYTES / 4 + 123;
        recycle(CpuBuffer::F32(vec![7.0; len]));
        assert!(pooled_bytes() >= len * 4);
        // Another test may take it first; either way the contents are right.
        let zeros = filled(len, 0.0f32);
        assert_eq!(zeros.len(), len);
        assert!(zeros.iter().all(|&v| v == 0.0));
        recycle(CpuBuffer::F32(zeros));
        let again = reused(len - 10, 0.0f32);
        assert_eq!(again.len(), len - 10);
        // Small and non-float requests never touch the pool.
        assert_eq!(filled(4, 0i64), vec![0; 4]);
        assert_eq!(reused(3, 0.0f64), vec![0.0; 3]);
    }
}
