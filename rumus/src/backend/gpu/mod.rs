//! The GPU backend: WGSL kernels (in `shaders/`, one file per family) run through wgpu.
//!
//! - Tensors stay on the device; data comes back only when asked for (`to_vec`, `item`,
//!   `.to(&Device::Cpu)`). Every op has a GPU kernel; host-only paths that meet a GPU tensor
//!   (state dict snapshots, writing files) read it back, and `transfer_counts()` (with the
//!   `gpu` feature) counts those copies apart from the asked-for ones, so nothing is hidden.
//! - Kernels take sizes and strides from a parameter block: one pipeline per kernel, cached
//!   at run time, whatever the shapes.
//! - Dispatches are recorded into one compute pass and submitted in batches.
//! - Shader modules are created without wgpu's runtime bounds checks; each kernel checks its
//!   own indices.
//! - Elements are 32-bit words (`f32`, `i64` as `i32`, `bool` as `u32`); `f64` stays on the CPU.

/// Items that exist only with the `gpu` feature.
macro_rules! with_gpu_feature {
    ($($item:item)*) => { $( #[cfg(feature = "gpu")] $item )* };
}

with_gpu_feature! {
    mod attention;
    mod batch;
    mod context;
    mod coopmat2;
    mod custom;
    mod elementwise;
    mod fault;
    mod index;
    mod int8;
    mod matmul;
    mod memory;
    mod norm;
    mod operand;
    mod optim;
    mod packed;
    mod pipelines;
    mod profile;
    mod reduce;
    mod sparse;
    mod transfer;
    mod update;
    mod wait;
    mod window;

    pub use context::GpuDevice;
    pub use memory::{GpuBuffer, MemoryStats};
    pub use profile::KernelTime;
    pub use transfer::{TransferCounts, transfer_counts};
    pub(crate) use transfer::{download_asked, upload as upload_buffer};
}

#[cfg(not(feature = "gpu"))]
mod disabled;
#[cfg(not(feature = "gpu"))]
pub use disabled::{GpuBuffer, GpuDevice};
#[cfg(not(feature = "gpu"))]
pub(crate) use disabled::{download_asked, upload_buffer};
