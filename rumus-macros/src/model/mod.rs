//! `#[model]`: the module machinery for a struct of layers, and shape-checked forward methods
//! for its `impl`.
//!
//! A proc macro sees only the item it is attached to, yet a forward method needs the struct's
//! field types to compute shapes. So `#[model]` on the struct also emits a hidden
//! `macro_rules!` table holding the struct's tokens; `#[model]` on the `impl` expands to a call
//! of that table, which hands struct and impl together to the hidden `__model_impl!` proc
//! macro (the "callback macro" pattern). The impl must therefore come after the struct, in the
//! same module (or import the table: `use super::__rumus_model_Name;`).

pub mod expand_impl;
pub mod expand_struct;
mod field_type;
mod input_contract;
pub mod layers;
