//! In-place updates as storage runs them. The destination is written under its storage's
//! write lock; a source sharing that storage (`x.copy_(&x.t())`) is copied first, so every
//! element reads the old values whatever order the kernel writes in.

use super::Storage;
use super::dispatch::{Operand, on_backend_mut};
use crate::backend::Update;
use crate::error::Result;
use crate::shape::Layout;

use triomphe::Arc;

impl Storage {
    /// `dst = dst * scale + alpha * src` in place (`src` viewed with `dst`'s dims).
    pub(crate) fn scale_add(
        dst: Operand<'_>,
        src: Operand<'_>,
        scale: f64,
        alpha: f64,
    ) -> Result<()> {
        let apart = Apart::of(dst, src)?;
        on_backend_mut!(
            "in-place update",
            [dst],
            [apart.source(src)],
            |be, [d], [s]| be.scale_add(d, s, scale, alpha)
        )?
        .expect("the source is apart from the destination");
        Ok(())
    }

    /// `dst = src` in place, any dtype.
    pub(crate) fn copy_into(dst: Operand<'_>, src: Operand<'_>) -> Result<()> {
        let apart = Apart::of(dst, src)?;
        on_backend_mut!("copy_", [dst], [apart.source(src)], |be, [d], [s]| be
            .copy_into(d, s))?
        .expect("the source is apart from the destination");
        Ok(())
    }
}

/// An update's source apart from its destination: a contiguous copy when it shares the
/// destination's storage, else the source itself.
struct Apart(Option<(Arc<Storage>, Layout)>);

impl Apart {
    fn of(dst: Operand<'_>, src: Operand<'_>) -> Result<Apart> {
        if !std::ptr::eq(dst.storage, src.storage) {
            return Ok(Apart(None));
        }
        let copy = Storage::copy(src)?;
        Ok(Apart(Some((copy, Layout::contiguous(src.layout.dims())))))
    }

    /// The operand the update reads.
    fn source<'a>(&'a self, src: Operand<'a>) -> Operand<'a> {
        match &self.0 {
            Some((storage, layout)) => Operand {
                storage,
                layout,
                scalar: src.scalar,
            },
            None => src,
        }
    }
}
