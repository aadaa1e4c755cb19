//! Host memory: one `Vec` per dtype. The CPU backend's kernels read and write it; `Storage`
//! holds it for host tensors.

use crate::dtype::DType;

/// Host memory of one dtype.
#[derive(Debug, Clone)]
pub enum CpuBuffer {
    /// 32-bit floats.
    F32(Vec<f32>),
    /// 64-bit floats.
    F64(Vec<f64>),
    /// 16-bit (IEEE half-precision) floats.
    F16(Vec<half::f16>),
    /// bfloat16 floats.
    BF16(Vec<half::bf16>),
    /// 64-bit signed integers (class indices, counters).
    I64(Vec<i64>),
    /// Booleans (masks).
    Bool(Vec<bool>),
}

impl CpuBuffer {
    /// The dtype of the elements held.
    pub fn dtype(&self) -> DType {
        match self {
            CpuBuffer::F32(_) => DType::F32,
            CpuBuffer::F64(_) => DType::F64,
            CpuBuffer::F16(_) => DType::F16,
            CpuBuffer::BF16(_) => DType::BF16,
            CpuBuffer::I64(_) => DType::I64,
            CpuBuffer::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements (not bytes).
    pub fn len(&self) -> usize {
        match self {
            CpuBuffer::F32(v) => v.len(),
            CpuBuffer::F64(v) => v.len(),
            CpuBuffer::F16(v) => v.len(),
            CpuBuffer::BF16(v) => v.len(),
            CpuBuffer::I64(v) => v.len(),
            CpuBuffer::Bool(v) => v.len(),
        }
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Builds a buffer of the same dtype by running `$body` on the typed vector `$values`
/// (the body is instantiated once per dtype).
macro_rules! map_buffer {
    ($buffer:expr, |$values:ident| $body:expr) => {
        match $buffer {
            $crate::backend::cpu::CpuBuffer::F32($values) => {
                $crate::backend::cpu::CpuBuffer::F32($body)
            }
            $crate::backend::cpu::CpuBuffer::F64($values) => {
                $crate::backend::cpu::CpuBuffer::F64($body)
            }
            $crate::backend::cpu::CpuBuffer::F16($values) => {
                $crate::backend::cpu::CpuBuffer::F16($body)
            }
            $crate::backend::cpu::CpuBuffer::BF16($values) => {
                $crate::backend::cpu::CpuBuffer::BF16($body)
            }
            $crate::backend::cpu::CpuBuffer::I64($values) => {
                $crate::backend::cpu::CpuBuffer::I64($body)
            }
            $crate::backend::cpu::CpuBuffer::Bool($values) => {
                $crate::backend::cpu::CpuBuffer::Bool($body)
            }
        }
    };
}

pub(crate) use map_buffer;

/// Reads a float buffer as `$T` (`f32` or `f64`) in `$body`, or returns a dtype error.
macro_rules! with_float {
    ($buffer:expr, $op:expr, |$data:ident : $T:ident| $body:expr) => {
        match $buffer {
            $crate::backend::cpu::CpuBuffer::F32($data) => {
                #[allow(dead_code)]
                type $T = f32;
                $body
            }
            $crate::backend::cpu::CpuBuffer::F64($data) => {
                #[allow(dead_code)]
                type $T = f64;
                $body
            }
            other => {
                return Err($crate::error::Error::DType {
                    op: $op,
                    expected: "a floating-point tensor (f32 or f64)",
                    found: other.dtype(),
                });
            }
        }
    };
}
pub(crate) use with_float;

/// `out.extend_from_slice(values)`, compiled into the caller: `Vec::extend_from_slice` goes
/// through `spec_extend`, which is not `#[inline]`, so where codegen units are not inlined into
/// each other (`lto = "off"`, as the README's dev profile builds dependencies) a loop appending
/// short rows (an edge's features in a graph layer) made a call per row.
#[inline]
pub(super) fn append<T: Copy>(out: &mut Vec<T>, values: &[T]) {
    if out.capacity() - out.len() < values.len() {
        // (`Vec::reserve` is not `#[inline]` either: callers that reserved skip the call.)
        out.reserve(values.len());
    }
    // SAFETY: the capacity holds `values.len()` more elements (reserved above), the source
    // cannot overlap the spare capacity, and the length covers them only once written.
    unsafe {
        let end = out.as_mut_ptr().add(out.len());
        std::ptr::copy_nonoverlapping(values.as_ptr(), end, values.len());
        out.set_len(out.len() + values.len());
    }
}
