//! CPU kernels. They are generic over the element type only (`f32`/`f64`, sometimes integers)
//! and never over shapes: dims arrive as `&[usize]` inside a [`Layout`](crate::shape::Layout),
//! so adding a model never compiles a new kernel.

pub mod attention;
mod backend;
#[cfg(feature = "llm")]
pub(crate) mod block_quant;
mod buffer;
mod concat;
mod conv_tiles;
mod cross_entropy;
mod custom;
mod depthwise_conv;
pub mod direct_conv;
pub mod dropout;
mod elementwise;
mod index;
pub(crate) mod int8;
pub mod matmul;
pub mod norm;
pub mod optim;
#[cfg(feature = "llm")]
pub(crate) mod paged_attention;
pub mod parallel;
pub mod pool;
pub mod reduce;
pub mod simd;
pub mod small_buffers;
mod sparse;
pub mod strided;
mod transpose;
pub mod unfold;
mod update;
mod vector_math;
mod window;

pub use backend::Cpu;
pub use buffer::CpuBuffer;
pub(crate) use buffer::map_buffer;
