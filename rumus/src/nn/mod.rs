//! Layers and the module machinery `#[model]` builds on.

mod conv;
mod forward;
mod linear;
mod module;

pub use conv::Conv2d;
pub use forward::Forward;
pub use linear::Linear;
pub use module::{Device, Module, StateDict, group_digits};
