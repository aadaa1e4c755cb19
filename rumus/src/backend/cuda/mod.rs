//! The CUDA backend: NVIDIA GPUs through the CUDA driver API (`cudarc`, loaded with dlopen
//! when a device opens, so building needs no CUDA toolkit).
//!
//! - Products run on cuBLASLt (`matmul.rs`); every other kernel is CUDA C in
//!   `shaders/cuda/`, compiled by NVRTC for the device's architecture the first time a
//!   module is used, and kept for the process (`compile.rs`).
//! - Every kernel of a device runs in order on one stream; nothing waits for the GPU except
//!   reading data back (`to_vec`, `item`, `.to(&Device::Cpu)`) and [`CudaDevice::synchronize`].
//! - Memory comes from the driver's stream-ordered pool with its release threshold raised,
//!   so a freed buffer's memory serves the next allocation without a `cudaMalloc`.
//! - Elements are stored at their own width: `f32`, `f64`, `f16` (computed in `f32`, rounded
//!   once), `i64`, and `bool` as a byte.
//! - A kernel this backend does not have yet is [`DeviceError::Unsupported`] naming the op
//!   (the contract's default), never a silent copy to the host.
//!
//! [`DeviceError::Unsupported`]: crate::error::DeviceError::Unsupported

/// Items that exist only with the `cuda` feature.
macro_rules! with_cuda_feature {
    ($($item:item)*) => { $( #[cfg(feature = "cuda")] $item )* };
}

with_cuda_feature! {
    mod allocate;
    mod attention;
    mod compile;
    mod context;
    mod elementwise;
    mod index;
    mod launch;
    mod loss;
    mod matmul;
    mod memory;
    mod norm;
    mod optim;
    mod profile;
    mod reduce;
    mod sparse;
    mod transfer;
    mod unsupported;
    mod window;

    pub use compile::compile_every_kernel;
    pub use context::CudaDevice;
    pub use memory::CudaBuffer;
    pub(crate) use transfer::{download, upload};
}

#[cfg(not(feature = "cuda"))]
mod disabled;
#[cfg(not(feature = "cuda"))]
pub use disabled::{CudaBuffer, CudaDevice};
#[cfg(not(feature = "cuda"))]
pub(crate) use disabled::{download, upload};
