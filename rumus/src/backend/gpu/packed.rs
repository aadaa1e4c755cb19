//! An operand as a kernel that reads offset-addressed contiguous elements needs it: the
//! operand's own buffer where its view already is contiguous, else a contiguous copy.

use super::context::GpuDevice;
use super::memory::GpuBuffer;
use crate::backend::{Pointwise, Src};
use crate::error::Result;
use crate::shape::Layout;

/// Contiguous elements of an operand, from [`Packed::new`].
pub(crate) struct Packed<'a> {
    source: &'a GpuBuffer,
    copy: Option<GpuBuffer>,
    /// Where the elements start, in elements.
    pub offset: usize,
}

impl<'a> Packed<'a> {
    /// The elements of `memory` viewed through `layout`, in row-major order: `memory` itself
    /// when the view is contiguous, else a copy.
    pub fn new(gpu: &GpuDevice, memory: &'a GpuBuffer, layout: &Layout) -> Result<Self> {
        let (copy, offset) = if layout.is_contiguous() {
            (None, layout.offset())
        } else {
            (Some(Pointwise::copy(gpu, Src::new(memory, layout))?), 0)
        };
        Ok(Packed {
            source: memory,
            copy,
            offset,
        })
    }

    /// An operand's elements (see [`Packed::new`]).
    pub fn of(gpu: &GpuDevice, x: Src<'a, GpuBuffer>) -> Result<Self> {
        Self::new(gpu, x.memory, x.layout)
    }

    /// The buffer holding the elements.
    pub fn memory(&self) -> &GpuBuffer {
        self.copy.as_ref().unwrap_or(self.source)
    }
}
