//! Shapes: runtime layouts for the core tensor, and shape types for the typed façade.

mod dim;
mod layout;
mod typed;

pub use dim::{D, Dim, Dyn, Unify};
pub use layout::{
    Dims, Layout, broadcast_shapes, checked_numel, contiguous_strides, normalize_axes,
    normalize_axis,
};
pub use typed::{Shape, UnifyShape};
