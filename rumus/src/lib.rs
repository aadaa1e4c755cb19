//! # rumus
//!
//! Deep learning in Rust with tensor shapes checked at compile time.
//!
//! Two layers of tensor:
//! - [`DynTensor`]: shape known at run time; every op returns [`Result`]. It owns all kernels
//!   and backward formulas, which are compiled once, not per shape.
//! - [`Tensor<S, E>`](Tensor): the same tensor with its shape and element type (`f32` unless
//!   named) as types, e.g. `Tensor<(Dyn, D<784>)>`. Shape mistakes between static dims and
//!   element-type mistakes are compile errors; see [`Tensor`] for what is left to run time
//!   (the `try_` forms).
//!
//! Gradients come from a tape of [`autograd::BackwardOp`] records:
//!
//! ```
//! use rumus::prelude::*;
//!
//! # fn main() -> rumus::Result<()> {
//! let w = Tensor::<(D<2>, D<2>)>::from_vec(vec![1.0f32, 2.0, 3.0, 4.0])?.requires_grad_()?;
//! let x = Tensor::<(D<2>, D<1>)>::from_vec(vec![1.0f32, -1.0])?;
//! let loss = w.matmul(&x).tanh().sum_all();
//! let grads = loss.backward()?;
//! assert_eq!(grads.grad_of(&w)?.dims(), &[2, 2]);
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

pub(crate) mod alloc;
pub mod autograd;
pub mod backend;
pub mod data;
pub mod device;
#[cfg(feature = "distributed")]
pub mod distributed;
pub mod dtype;
pub mod element;
pub mod error;
pub mod io;
mod live_counts;
pub mod nn;
pub mod onnx;
pub mod ops;
pub mod optim;
pub mod rng;
pub mod shape;
pub mod storage;
pub mod tensor;
pub mod train;

#[doc(hidden)]
pub mod __private {
    pub use crate::private::*;
}
mod private;

pub use autograd::{GradientStore, grad, gradcheck, no_grad};
pub use device::Device;
pub use dtype::DType;
pub use error::{AutogradError, DeviceError, Error, Result, ShapeError};
/// The element type of `DType::F16` tensors (`from_vec`, `to_vec`), from the `half` crate.
pub use half::f16;
pub use rng::manual_seed;
pub use rumus_macros::{model, tensor_fn};
pub use shape::{D, Dim, Dyn, Shape};
pub use tensor::DynTensor;
pub use tensor::typed::{Elementwise, StaticShape, Tensor};

/// The names most programs need.
pub mod prelude {
    pub use crate::autograd::{GradientStore, no_grad};
    pub use crate::nn::{Conv2d, Linear, Module};
    pub use crate::{
        D, DType, Device, Dim, Dyn, DynTensor, Shape, Tensor, manual_seed, model, tensor_fn,
    };
}
