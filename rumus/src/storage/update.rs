//! In-place updates as storage runs them. The destination is written under its storage's
//! write lock; a source sharing that storage (`x.copy_(&x.t())`) is copied first, so every
//! element reads the old values whatever order the kernel writes in.

use super::Storage;
use super::dispatch::{Operand, run_mut};
use crate::backend::cpu::{Cpu, CpuBuffer};
use crate::backend::gpu::{GpuBuffer, GpuDevice};
use crate::backend::{Dst, Src, Update};
use crate::error::Result;
use crate::shape::Layout;

impl Storage {
    /// `dst = dst * scale + alpha * src` in place (`src` viewed with `dst`'s dims).
    pub(crate) fn scale_add(
        dst: Operand<'_>,
        src: Operand<'_>,
        scale: f64,
        alpha: f64,
    ) -> Result<()> {
        update_from(
            "in-place update",
            dst,
            src,
            |be: &Cpu, [d], [s]| be.scale_add(d, s, scale, alpha),
            |be: &GpuDevice, [d], [s]| be.scale_add(d, s, scale, alpha),
        )
    }

    /// `dst = src` in place, any dtype.
    pub(crate) fn copy_into(dst: Operand<'_>, src: Operand<'_>) -> Result<()> {
        update_from(
            "copy_",
            dst,
            src,
            |be: &Cpu, [d], [s]| be.copy_into(d, s),
            |be: &GpuDevice, [d], [s]| be.copy_into(d, s),
        )
    }
}

/// Runs the update `cpu`/`gpu` of `dst` from `src`; from a contiguous copy of `src` when it
/// shares `dst`'s storage.
fn update_from(
    op: &'static str,
    dst: Operand<'_>,
    src: Operand<'_>,
    cpu: impl Fn(&Cpu, [Dst<'_, CpuBuffer>; 1], [Src<'_, CpuBuffer>; 1]) -> Result<()>,
    gpu: impl Fn(&GpuDevice, [Dst<'_, GpuBuffer>; 1], [Src<'_, GpuBuffer>; 1]) -> Result<()>,
) -> Result<()> {
    if run_mut(op, [dst], [src], &cpu, &gpu)?.is_some() {
        return Ok(());
    }
    let copy = Storage::copy(src)?;
    let layout = Layout::contiguous(src.layout.dims());
    let copied = Operand {
        storage: &copy,
        layout: &layout,
        scalar: src.scalar,
    };
    run_mut(op, [dst], [copied], cpu, gpu)?.expect("a fresh copy shares no storage");
    Ok(())
}
