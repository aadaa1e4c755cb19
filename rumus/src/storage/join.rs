//! Joining as storage runs it, for any number of operands.

use super::Storage;
use super::dispatch::{Operand, on_backend_many};
use crate::backend::Join;
use crate::error::Result;

use triomphe::Arc;

impl Storage {
    /// `parts` (checked to fit) joined along `axis` into contiguous memory of `dims`.
    pub(crate) fn cat(parts: &[Operand<'_>], axis: usize, dims: &[usize]) -> Result<Arc<Storage>> {
        on_backend_many!("cat", parts, |be, parts| be.cat(parts, axis, dims))
    }
}
