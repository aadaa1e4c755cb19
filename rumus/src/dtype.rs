//! Element types. Models train in `f32`; `f64` exists so gradients can be checked against
//! finite differences; `i64` and `bool` carry labels, indices and masks; `f16` halves the
//! memory of weights and activations and feeds the GPU's matrix units; `bf16` does the same
//! with `f32`'s range (what most language models ship in, and what autocast needs no loss
//! scaling for).

use std::fmt;

/// The element type of a tensor.
///
/// Non-exhaustive: more dtypes may come, so a `match` outside rumus needs a `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// 32-bit IEEE float, the default for models.
    F32,
    /// 64-bit IEEE float, for gradient checks and precise references.
    F64,
    /// IEEE half precision: a storage type. It converts to and from every other dtype,
    /// moves between devices, takes views and copies, and multiplies matrices (accumulating
    /// in `f32`, like PyTorch); other math wants a cast to `f32` first, and it carries no
    /// gradients.
    F16,
    /// bfloat16 (`f32`'s sign and exponent, 8 bits of significand): a storage type like
    /// [`DType::F16`], with the same operations. wgpu has no kernels for it (WGSL has no
    /// bfloat16); the CPU and CUDA do.
    BF16,
    /// 64-bit signed integer: class labels and indices.
    I64,
    /// `true`/`false`: masks and comparison results.
    Bool,
}

impl DType {
    /// Whether gradients can flow through tensors of this type.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// Bytes per element.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::F16 | DType::BF16 => 2,
            DType::Bool => 1,
        }
    }
}

impl DType {
    /// The name of the Rust element type (`f32`, `i64`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
