//! Layers and the module machinery `#[model]` builds on.

mod forward;
mod linear;
mod module;

pub use forward::Forward;
pub use linear::Linear;
pub use module::{Device, Module, StateDict, group_digits};
