//! Fused attention as storage runs it. Its kernels return several results, each a memory and
//! the view of it; they leave each backend's closure through a cell.

use std::cell::Cell;

use super::Storage;
use super::dispatch::{Operand, run};
use crate::backend::cpu::Cpu;
use crate::backend::gpu::GpuDevice;
use crate::backend::kinds::Geometry;
use crate::backend::{Attention, Viewed};
use crate::device::Device;
use crate::error::Result;
use crate::shape::Layout;

/// Runs `$call` (which leaves its results in a cell) on the backend holding the operands,
/// with `$wrap` the constructor of that backend's storage.
macro_rules! on_backend_into {
    ($op:expr, $operands:expr, |$be:ident, [$($x:ident),+], $wrap:ident| $call:expr) => {
        run(
            $op,
            $operands,
            |$be: &Cpu, [$($x),+]| {
                let $wrap = Storage::new;
                $call
            },
            |$be: &GpuDevice, [$($x),+]| {
                let $wrap = Storage::on_gpu;
                $call
            },
        )
    };
}

const OP: &str = "scaled_dot_product_attention";

/// `(memory, layout)` as storage.
fn stored<M>((memory, layout): Viewed<M>, wrap: impl Fn(M) -> Storage) -> (Storage, Layout) {
    (wrap(memory), layout)
}

impl Storage {
    /// The fused attention's output (and its view) and each query row's log-sum-exp, or
    /// `None` where the backend has no fused kernel for these sizes. `mask` is on the
    /// operands' device.
    pub(crate) fn attention_forward(
        [q, k, v]: [Operand<'_>; 3],
        mask: Option<Operand<'_>>,
        g: &Geometry,
        autocast: bool,
    ) -> Result<Option<((Storage, Layout), Storage)>> {
        let results = Cell::new(None);
        // Without a mask the queries stand in its place (locked once), unread.
        let has_mask = mask.is_some();
        let m = mask.unwrap_or(q);
        on_backend_into!(OP, [q, k, v, m], |be, [q, k, v, m], wrap| be
            .attention_forward([q, k, v], has_mask.then_some(m), g, autocast)
            .map(|fused| {
                results.set(fused.map(|(out, lse)| (stored(out, wrap), wrap(lse))));
            }))?;
        Ok(results.into_inner())
    }

    /// The gradients of the fused attention's `q`, `k` and `v`, each with its view.
    pub(crate) fn attention_backward(
        [q, k, v]: [Operand<'_>; 3],
        mask: Option<Operand<'_>>,
        [out, lse, grad]: [Operand<'_>; 3],
        g: &Geometry,
        autocast: bool,
    ) -> Result<[(Storage, Layout); 3]> {
        let results = Cell::new(None);
        let has_mask = mask.is_some();
        let m = mask.unwrap_or(q);
        on_backend_into!(
            OP,
            [q, k, v, m, out, lse, grad],
            |be, [q, k, v, m, out, lse, grad], wrap| be
                .attention_backward(
                    [q, k, v],
                    has_mask.then_some(m),
                    [out, lse, grad],
                    g,
                    autocast
                )
                .map(|grads| results.set(Some(grads.map(|viewed| stored(viewed, wrap)))))
        )?;
        Ok(results.into_inner().expect("set by the backend's closure"))
    }

    /// Whether an attention with rows `width` wide on `device` would run on its matrix units.
    pub(crate) fn attention_on_matrix_units(device: &Device, width: usize, autocast: bool) -> bool {
        match device {
            Device::Cpu => Cpu.attention_on_matrix_units(width, autocast),
            Device::Gpu(gpu) => gpu.attention_on_matrix_units(width, autocast),
        }
    }
}
