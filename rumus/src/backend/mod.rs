//! Compute backends. Ops reach CPU kernels through plain functions taking slices and layouts;
//! ops whose operands are on a GPU call the GPU launchers instead (`gpu`, behind the `gpu`
//! cargo feature).

pub mod cpu;
pub mod gpu;
