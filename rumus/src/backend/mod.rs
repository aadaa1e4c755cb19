//! Compute backends. Only the CPU exists so far; ops reach kernels through plain functions
//! taking slices and layouts, which is the seam a GPU backend plugs into.

pub mod cpu;
pub mod gpu;
