//! The GPU backend: WGSL kernels (in `shaders/`, one file per family) run through wgpu.
//!
//! - Tensors stay on the device; data comes back only when asked for (`to_vec`, `item`,
//!   `.to(&Device::Cpu)`). Every op has a GPU kernel; host-only paths that meet a GPU tensor
//!   (state dict snapshots, writing files) read it back, and [`transfer_counts`] counts
//!   those copies apart from the asked-for ones, so nothing is hidden.
//! - Kernels take sizes and strides from a parameter block: one pipeline per kernel, cached
//!   at run time, whatever the shapes.
//! - Dispatches are recorded into one compute pass and submitted in batches.
//! - Shader modules are created without wgpu's runtime bounds checks; each kernel checks its
//!   own indices.
//! - Elements are 32-bit words (`f32`, `i64` as `i32`, `bool` as `u32`); `f64` stays on the CPU.

#[cfg(feature = "gpu")]
mod batch;
#[cfg(feature = "gpu")]
mod context;
#[cfg(feature = "gpu")]
mod elementwise;
#[cfg(feature = "gpu")]
mod index;
#[cfg(feature = "gpu")]
mod matmul;
#[cfg(feature = "gpu")]
mod memory;
#[cfg(feature = "gpu")]
mod operand;
#[cfg(feature = "gpu")]
mod optim;
#[cfg(feature = "gpu")]
mod pipelines;
#[cfg(feature = "gpu")]
mod reduce;
#[cfg(feature = "gpu")]
mod transfer;
#[cfg(feature = "gpu")]
mod window;

#[cfg(feature = "gpu")]
pub use context::GpuDevice;
#[cfg(feature = "gpu")]
pub(crate) use memory::check_dtype as memory_check_dtype;
#[cfg(feature = "gpu")]
pub use memory::{GpuBuffer, MemoryStats};
#[cfg(feature = "gpu")]
pub use transfer::{TransferCounts, transfer_counts};
#[cfg(feature = "gpu")]
pub(crate) use transfer::{download_asked, upload as upload_buffer, upload_asked};
#[cfg(feature = "gpu")]
pub(crate) use window::WindowOp;

#[cfg(not(feature = "gpu"))]
mod disabled;
#[cfg(not(feature = "gpu"))]
pub use disabled::{GpuBuffer, GpuDevice};
#[cfg(not(feature = "gpu"))]
pub(crate) use disabled::{download_asked, upload_asked, upload_buffer};
