// The crate's front page is the tour in README.md (also what a package registry shows), so
// its examples are compiled and run as doctests and cannot drift from the API.
#![doc = include_str!("../README.md")]
//!
//! ## Where things are
//!
//! - [`Tensor`] and [`DynTensor`], the two layers of tensor; [`shape`] holds the dims
//!   ([`D`], [`Dyn`], [`dim!`]) and [`dtype`] the element types.
//! - [`autograd`]: the tape of [`BackwardRecord`](autograd::BackwardRecord)s (for rumus's
//!   ops, the [`BackwardOp`](ops::BackwardOp) table of derivatives), [`GradientStore`],
//!   [`grad`] for higher derivatives, [`gradcheck`].
//! - [`nn`]: layers, losses, initialisers and the [`Module`](nn::Module) trait that
//!   [`#[model]`](model) implements; [`tensor_fn!`] writes forward passes with shapes.
//! - [`optim`]: [`Sgd`](optim::Sgd), [`Adam`](optim::Adam) (and AdamW),
//!   [`Rmsprop`](optim::Rmsprop), [`Adagrad`](optim::Adagrad), schedules and clipping.
//! - [`data`]: datasets, transforms and the [`DataLoader`](data::DataLoader); [`io`]:
//!   safetensors and [`Checkpoint`](io::Checkpoint)s; [`train`]: the training loop.
//! - `onnx` (the `onnx` feature): export and import; `llm` (the `llm` feature): language
//!   models from GGUF files and Hugging Face checkpoints.
//! - [`ops`]: every op, and [`ops::custom`] for your own; [`device`] and [`backend`]: CPU and
//!   GPU kernels; [`rng`]: the global generator.
#![warn(missing_docs)]
// docs.rs documents every feature (`[package.metadata.docs.rs]`) and, through `doc_cfg`, badges
// each gated item with the feature that enables it.
#![cfg_attr(docsrs, feature(doc_cfg))]

pub(crate) mod alloc;
pub mod amp;
pub mod autograd;
pub mod backend;
pub mod data;
pub mod device;
#[cfg(feature = "distributed")]
#[cfg_attr(docsrs, doc(cfg(feature = "distributed")))]
pub mod distributed;
pub mod dtype;
pub mod element;
pub mod error;
pub mod io;
mod live_counts;
#[cfg(feature = "llm")]
#[cfg_attr(docsrs, doc(cfg(feature = "llm")))]
pub mod llm;
pub mod nn;
#[cfg(feature = "onnx")]
#[cfg_attr(docsrs, doc(cfg(feature = "onnx")))]
pub mod onnx;
pub mod ops;
pub mod optim;
pub mod rng;
pub mod shape;
pub mod sparse;
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
/// The element type of `DType::BF16` tensors (`from_vec`, `to_vec`), from the `half` crate.
pub use half::bf16;
/// The element type of `DType::F16` tensors (`from_vec`, `to_vec`), from the `half` crate.
pub use half::f16;
pub use ops::detect_anomaly;
pub use rng::manual_seed;
pub use rumus_macros::{model, tensor_fn};
pub use shape::{D, Dim, Dyn, Shape};
pub use tensor::DynTensor;
pub use tensor::typed::{Elementwise, MatmulRhs, StaticShape, Tensor};

/// The names most programs need: tensors and their shapes, the macros, and the layers of
/// everyday models (the rest of [`nn`] by path: attention, recurrent layers, losses, ...).
pub mod prelude {
    pub use crate::autograd::{GradientStore, no_grad};
    pub use crate::nn::{
        AvgPool2d, BatchNorm1d, BatchNorm2d, Conv1d, Conv2d, Dropout, Embedding, Flatten, Gelu,
        LayerNorm, Linear, MaxPool2d, Module, Relu, Sigmoid, Silu, Tanh,
    };
    pub use crate::{
        D, DType, Device, Dim, Dyn, DynTensor, Shape, Tensor, manual_seed, model, tensor_fn,
    };
}
