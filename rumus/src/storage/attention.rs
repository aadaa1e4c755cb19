//! Fused attention as storage runs it. Its kernels return several results, each a memory and
//! the view of it; they leave each backend's closure through a cell.

use std::cell::Cell;

use super::Storage;
use super::dispatch::{IntoStorage, Operand, on_backend};
use crate::backend::cpu::Cpu;
use crate::backend::kinds::Geometry;
use crate::backend::{Attention, Viewed};
use crate::device::Device;
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::Layout;

use triomphe::Arc;

const OP: &str = "scaled_dot_product_attention";

/// A result of the fused kernels as storage, with the view it is read through.
type StoredView = (Arc<Storage>, Layout);

/// `(memory, layout)` as storage.
fn stored<M: IntoStorage<Output = Arc<Storage>>>((memory, layout): Viewed<M>) -> StoredView {
    (memory.into_storage(), layout)
}

impl Storage {
    /// The fused attention's output (and its view) and each query row's log-sum-exp, or
    /// `None` where the backend has no fused kernel for these sizes. `mask` is on the
    /// operands' device.
    pub(crate) fn attention_forward(
        [q, k, v]: [Operand<'_>; 3],
        mask: Option<Operand<'_>>,
        g: &Geometry,
        autocast: Option<DType>,
    ) -> Result<Option<(StoredView, Arc<Storage>)>> {
        let results = Cell::new(None);
        // Without a mask the queries stand in its place (locked once), unread.
        let has_mask = mask.is_some();
        let m = mask.unwrap_or(q);
        on_backend!(OP, [q, k, v, m], |be, [q, k, v, m]| be
            .attention_forward([q, k, v], has_mask.then_some(m), g, autocast)
            .map(|fused| {
                results.set(fused.map(|(out, lse)| (stored(out), lse.into_storage())));
            }))?;
        Ok(results.into_inner())
    }

    /// The gradients of the fused attention's `q`, `k` and `v`, each with its view.
    pub(crate) fn attention_backward(
        [q, k, v]: [Operand<'_>; 3],
        mask: Option<Operand<'_>>,
        [out, lse, grad]: [Operand<'_>; 3],
        g: &Geometry,
        autocast: Option<DType>,
    ) -> Result<[StoredView; 3]> {
        let results = Cell::new(None);
        let has_mask = mask.is_some();
        let m = mask.unwrap_or(q);
        let operands = [q, k, v, m, out, lse, grad];
        on_backend!(OP, operands, |be, [q, k, v, m, out, lse, g_out]| {
            let mask = has_mask.then_some(m);
            let grads = be.attention_backward([q, k, v], mask, [out, lse, g_out], g, autocast)?;
            results.set(Some(grads.map(stored)));
            Ok(())
        })?;
        Ok(results.into_inner().expect("set by the backend's closure"))
    }

    /// Whether an attention with rows `width` wide on `device` would run on its matrix units.
    pub(crate) fn attention_on_matrix_units(
        device: &Device,
        width: usize,
        autocast: Option<DType>,
    ) -> bool {
        match device {
            Device::Cpu => Cpu.attention_on_matrix_units(width, autocast),
            Device::Gpu(gpu) => gpu.attention_on_matrix_units(width, autocast),
            Device::Cuda(cuda) => cuda.attention_on_matrix_units(width, autocast),
        }
    }
}
