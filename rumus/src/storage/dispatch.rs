//! The one place that picks a backend: an op hands its operands' storages and views here,
//! this reads where their memory lives (host or one GPU), and calls that backend's kernel
//! through the [`Kernels`](crate::backend::Kernels) contract (the methods of `Storage` that
//! ops call are in this module's siblings, one file per family of kernels). Ops never name a
//! backend; a new backend is a new [`Memory`] variant, a branch in [`run`], and its impls of
//! the contract.
//!
//! Operands must share a device. The one exception, as in PyTorch, is a rank-0 host tensor
//! (a scalar such as the `0` of ReLU's gradient), which joins a GPU op as a constant.

use std::sync::{Arc, RwLockReadGuard};

use smallvec::SmallVec;

use super::{Memory, Storage};
use crate::backend::Src;
use crate::backend::cpu::{Cpu, CpuBuffer};
use crate::backend::gpu::{GpuBuffer, GpuDevice};
use crate::device::Device;
use crate::error::{DeviceError, Result};
use crate::shape::Layout;

/// One operand of an op: its storage, the view the kernel reads (broadcast to the output
/// where the op broadcasts), and whether the tensor is rank 0 (may join another device's op).
#[derive(Clone, Copy)]
pub(crate) struct Operand<'a> {
    pub storage: &'a Storage,
    pub layout: &'a Layout,
    pub scalar: bool,
}

/// Runs `$call` on the backend holding the operands: `$be` is the backend and `[$x, ..]` the
/// operands as that backend's [`Src`]s. The body is written once and instantiated per backend.
macro_rules! on_backend {
    ($op:expr, $operands:expr, |$be:ident, [$($x:ident),+]| $call:expr) => {
        $crate::storage::dispatch::run(
            $op,
            $operands,
            |$be: &$crate::backend::cpu::Cpu, [$($x),+]| $call.map(Some),
            |$be: &$crate::backend::gpu::GpuDevice, [$($x),+]| $call.map(Some),
        )
        .map(|out| out.expect("every kernel above returns memory"))
    };
}
pub(super) use on_backend;

/// Per-operand state of one dispatch, on the stack for the few operands an op has.
type Few<T> = SmallVec<[T; 8]>;

/// Locks every operand's memory for reading, finds the backend they share, and runs its
/// kernel: `cpu` when all are on the host, `gpu` when all are on one GPU (rank-0 host
/// operands joining as constants). Operands on different devices are an error naming both.
pub(super) fn run<const N: usize>(
    op: &'static str,
    operands: [Operand<'_>; N],
    cpu: impl FnOnce(&Cpu, [Src<'_, CpuBuffer>; N]) -> Result<Option<CpuBuffer>>,
    gpu: impl FnOnce(&GpuDevice, [Src<'_, GpuBuffer>; N]) -> Result<Option<GpuBuffer>>,
) -> Result<Option<Storage>> {
    run_many(
        op,
        &operands,
        |be, srcs| cpu(be, std::array::from_fn(|k| srcs[k])),
        |be, srcs| gpu(be, std::array::from_fn(|k| srcs[k])),
    )
}

/// [`run`] for any number of operands (a custom op's inputs), handed to the kernel in order.
///
/// Read locks are taken in one global order (by storage address) and once per storage:
/// std's `RwLock` makes a new reader wait behind a waiting writer, so two threads taking
/// two locks in opposite orders, with writers queued on both, would wait for each other.
pub(super) fn run_many(
    op: &'static str,
    operands: &[Operand<'_>],
    cpu: impl FnOnce(&Cpu, &[Src<'_, CpuBuffer>]) -> Result<Option<CpuBuffer>>,
    gpu: impl FnOnce(&GpuDevice, &[Src<'_, GpuBuffer>]) -> Result<Option<GpuBuffer>>,
) -> Result<Option<Storage>> {
    let n = operands.len();
    // The operand whose guard serves operand k (the first with the same storage).
    let owner: Few<usize> = (0..n)
        .map(|k| {
            (0..k)
                .find(|&j| std::ptr::eq(operands[j].storage, operands[k].storage))
                .unwrap_or(k)
        })
        .collect();
    let mut order: Few<usize> = (0..n).collect();
    order.sort_unstable_by_key(|&k| operands[k].storage.lock_order());
    let mut guards: Few<Option<RwLockReadGuard<'_, Memory>>> = (0..n).map(|_| None).collect();
    for &k in &order {
        if owner[k] == k {
            guards[k] = Some(operands[k].storage.lock());
        }
    }
    let memory = |k: usize| -> &Memory { guards[owner[k]].as_deref().expect("locked above") };

    if (0..n).all(|k| matches!(memory(k), Memory::Host(_))) {
        let srcs: Few<_> = (0..n)
            .map(|k| match memory(k) {
                Memory::Host(buffer) => Src::new(buffer, operands[k].layout),
                Memory::Gpu(_) => unreachable!("all on the host"),
            })
            .collect();
        return Ok(cpu(&Cpu, &srcs)?.map(Storage::new));
    }

    let device = shared_gpu(op, operands, &memory)?;
    // Rank-0 host operands, uploaded once per value (the device keeps them) and read
    // through a broadcast of their single element.
    let mut constants: Few<Option<(Arc<GpuBuffer>, Layout)>> = (0..n).map(|_| None).collect();
    for (k, constant) in constants.iter_mut().enumerate() {
        if let Memory::Host(host) = memory(k) {
            let layout = operands[k].layout;
            let value = device.constant(host, layout.offset())?;
            *constant = Some((value, Layout::contiguous(&[]).broadcast_to(layout.dims())));
        }
    }
    let srcs: Few<_> = (0..n)
        .map(|k| match (memory(k), &constants[k]) {
            (Memory::Gpu(buffer), _) => Src::new(buffer, operands[k].layout),
            (Memory::Host(_), Some((buffer, layout))) => Src::new(&**buffer, layout),
            (Memory::Host(_), None) => unreachable!("every host operand got a constant"),
        })
        .collect();
    Ok(gpu(&device, &srcs)?.map(Storage::on_gpu))
}

/// The GPU that holds the operands on one, when every other operand is a rank-0 host
/// tensor; otherwise the mismatch, naming both devices.
fn shared_gpu<'g>(
    op: &'static str,
    operands: &[Operand<'_>],
    memory: &impl Fn(usize) -> &'g Memory,
) -> Result<GpuDevice> {
    let n = operands.len();
    let mut found: Option<GpuDevice> = None;
    for k in 0..n {
        if let Memory::Gpu(buffer) = memory(k) {
            let device = buffer.device();
            match &found {
                Some(seen) if *seen != device => {
                    return Err(DeviceError::Mismatch {
                        op,
                        lhs: Device::Gpu(seen.clone()).to_string(),
                        rhs: Device::Gpu(device).to_string(),
                    }
                    .into());
                }
                _ => found = Some(device),
            }
        }
    }
    let device = found.expect("called with an operand on a GPU");
    if let Some(host) =
        (0..n).find(|&k| matches!(memory(k), Memory::Host(_)) && !operands[k].scalar)
    {
        return Err(DeviceError::Mismatch {
            op,
            lhs: Device::Gpu(device).to_string(),
            rhs: format!("cpu, shape {:?}", operands[host].layout.dims()),
        }
        .into());
    }
    Ok(device)
}
