//! Making memory: a tensor filled with one value on a device.

use super::Backend;
use crate::dtype::DType;
use crate::error::Result;

/// Memory made from nothing.
pub trait Allocate: Backend {
    /// `dims` elements of `dtype`, every one `value` (converted to the dtype).
    fn full(&self, dims: &[usize], value: f64, dtype: DType) -> Result<Self::Memory> {
        let _ = (dims, value, dtype);
        Err(self.unsupported("full"))
    }
}
