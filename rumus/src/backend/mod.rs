//! Compute backends and the contract they share.
//!
//! A backend owns its memory type and its kernels, which take that memory plus a
//! [`Layout`](crate::shape::Layout) per operand ([`Src`]) and return fresh memory. The contract is
//! the [`Backend`] trait; [`Storage`](crate::storage::Storage) looks at where an op's operands
//! live and calls that backend, once per op. Ops, layers and optimizers never name a concrete
//! backend.
//!
//! - [`cpu`]: host memory, rayon kernels with runtime SIMD dispatch.
//! - [`gpu`]: wgpu buffers, WGSL kernels (behind the `gpu` cargo feature).
//! - [`cuda`]: CUDA memory on NVIDIA GPUs, CUDA C kernels compiled by NVRTC and cuBLASLt
//!   products (behind the `cuda` cargo feature).
//!
//! This module sits below `storage`, `tensor` and `ops`: nothing here imports them. The op
//! codes kernels understand ([`kinds`]) live here for that reason.

mod contract;
pub mod cpu;
pub mod cuda;
pub mod gpu;
pub mod kinds;
#[cfg(any(feature = "gpu", feature = "cuda"))]
mod strided;

#[cfg(not(all(feature = "gpu", feature = "cuda")))]
pub(crate) use contract::refuse_every_kernel;
/// The GPU time of one kernel entry point over a profiled stretch (`profile_kernels` of a
/// wgpu or CUDA device).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct KernelTime {
    /// Number of launches of the entry point that were timed.
    pub dispatches: u64,
    /// GPU time between each launch's start and end, summed.
    pub seconds: f64,
}

pub use contract::{
    Allocate, Attention, Backend, BackendMemory, CsrPattern, Custom, Dst, Forward, Index, Int8,
    Join, Kernels, Loss, Matmul, Norm, Optim, Pointwise, Reduce, Sparse, Src, Update, Viewed,
    Windows, check_index_dtype,
};
