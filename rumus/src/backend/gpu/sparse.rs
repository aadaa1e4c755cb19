//! The wgpu side of the [`Sparse`] contract.

use super::context::GpuDevice;
use crate::backend::Sparse;

impl Sparse for GpuDevice {}
