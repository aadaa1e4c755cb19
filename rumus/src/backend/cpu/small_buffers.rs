//! Reuse of tiny `f32` buffers on the thread that freed them.
//!
//! Ops on a handful of elements (scalars, biases, losses, the per-op overhead benchmark's
//! 16-element tensors) spend much of their time in the allocator: under callgrind, glibc's
//! `malloc` and `free` were a third of an untracked 16-element add. A freed output buffer
//! goes onto a short thread-local shelf instead, and the next tiny output of the same thread
//! takes it back: a push and a pop, with no lock and no atomic. The large buffers have their
//! own, shared pool ([`super::pool`]).

use std::any::TypeId;
use std::cell::RefCell;
use std::mem::ManuallyDrop;

/// Largest buffer kept, in elements (256 bytes).
pub const MAX_ELEMENTS: usize = 64;
/// Most buffers a thread keeps (at most 8 KiB).
const SHELF_LEN: usize = 32;

thread_local! {
    static SHELF: RefCell<Vec<Vec<f32>>> = const { RefCell::new(Vec::new()) };
}

/// An empty vector with room for `len` values: a shelved buffer when `T` is `f32`, `len` is
/// tiny and this thread freed one big enough; a fresh allocation otherwise.
#[inline]
pub fn with_capacity<T: 'static>(len: usize) -> Vec<T> {
    if TypeId::of::<T>() == TypeId::of::<f32>() && len <= MAX_ELEMENTS {
        // A thread being torn down has no shelf left; it allocates.
        let shelved = SHELF
            .try_with(|shelf| {
                let mut shelf = shelf.try_borrow_mut().ok()?;
                let fits = shelf.last()?.capacity() >= len;
                fits.then(|| shelf.pop()).flatten()
            })
            .ok()
            .flatten();
        if let Some(buffer) = shelved {
            let mut buffer = ManuallyDrop::new(buffer);
            // SAFETY: `T` is `f32` (checked above) and the vector is empty, so pointer, length
            // and capacity describe a valid `Vec<T>` of the same allocation.
            return unsafe {
                Vec::from_raw_parts(buffer.as_mut_ptr().cast::<T>(), 0, buffer.capacity())
            };
        }
    }
    Vec::with_capacity(len)
}

/// Keeps `buffer` for this thread's next tiny output when it is tiny and the shelf has
/// room; frees it otherwise.
#[inline]
pub fn give_back(mut buffer: Vec<f32>) {
    if buffer.capacity() == 0 || buffer.capacity() > MAX_ELEMENTS {
        return;
    }
    buffer.clear();
    let _ = SHELF.try_with(|shelf| {
        if let Ok(mut shelf) = shelf.try_borrow_mut()
            && shelf.len() < SHELF_LEN
        {
            shelf.push(buffer);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_tiny_buffer_serves_the_next_tiny_request() {
        let buffer: Vec<f32> = Vec::with_capacity(16);
        let address = buffer.as_ptr();
        give_back(buffer);
        let again = with_capacity::<f32>(12);
        assert_eq!((again.as_ptr(), again.len()), (address, 0));
        assert!(again.capacity() >= 12);
    }

    #[test]
    fn other_types_large_requests_and_large_buffers_allocate() {
        give_back(Vec::with_capacity(8));
        // Too large for the shelved buffer: a fresh one, and the shelf keeps its own.
        assert!(with_capacity::<f32>(32).capacity() >= 32);
        assert_eq!(with_capacity::<f64>(4).capacity(), 4);
        assert!(with_capacity::<f32>(MAX_ELEMENTS + 1).capacity() > MAX_ELEMENTS);
        give_back(Vec::with_capacity(MAX_ELEMENTS + 1));
        let mut filled: Vec<f32> = with_capacity(8);
        filled.extend([1.0; 8]);
        assert_eq!(filled, [1.0; 8]);
    }
}
