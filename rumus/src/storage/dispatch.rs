//! The one place that picks a backend: an op hands its operands' storages and views here,
//! this reads where their memory lives (host or one GPU), and calls that backend's kernel
//! through the [`Kernels`](crate::backend::Kernels) contract (the methods of `Storage` that
//! ops call are in this module's siblings, one file per family of kernels). Ops never name a
//! backend; a new backend is a new [`Memory`] variant, a branch in [`run`], and its impls of
//! the contract.
//!
//! Operands must share a device. The one exception, as in PyTorch, is a rank-0 host tensor
//! (a scalar such as the `0` of ReLU's gradient), which joins a GPU op as a constant.

use std::sync::{Arc, RwLockReadGuard, RwLockWriteGuard};

use smallvec::SmallVec;

use super::{Memory, Storage};
use crate::backend::cpu::{Cpu, CpuBuffer};
use crate::backend::cuda::{CudaBuffer, CudaDevice};
use crate::backend::gpu::{GpuBuffer, GpuDevice};
use crate::backend::{BackendMemory, Dst, Src};
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
    ($op:expr, $operands:expr, |$be:ident, [$($x:ident),+ $(,)?]| $call:expr) => {
        $crate::storage::dispatch::run(
            $op,
            $operands,
            |$be: &$crate::backend::cpu::Cpu, [$($x),+]| $call,
            |$be: &$crate::backend::gpu::GpuDevice, [$($x),+]| $call,
            |$be: &$crate::backend::cuda::CudaDevice, [$($x),+]| $call,
        )
    };
}
pub(super) use on_backend;

/// [`on_backend!`] for any number of operands ([`run_many`]): `$xs` is a slice of the
/// backend's [`Src`]s.
macro_rules! on_backend_many {
    ($op:expr, $operands:expr, |$be:ident, $xs:ident| $call:expr) => {
        $crate::storage::dispatch::run_many(
            $op,
            $operands,
            |$be: &$crate::backend::cpu::Cpu, $xs| $call,
            |$be: &$crate::backend::gpu::GpuDevice, $xs| $call,
            |$be: &$crate::backend::cuda::CudaDevice, $xs| $call,
        )
    };
}
pub(super) use on_backend_many;

/// [`on_backend!`] for kernels that write operands in place ([`run_mut`]): `[$w, ..]` are
/// the written operands as the backend's [`Dst`]s, `[$r, ..]` the read ones.
macro_rules! on_backend_mut {
    ($op:expr, $writes:expr, $reads:expr, |$be:ident, [$($w:ident),+], [$($r:ident),*]| $call:expr) => {
        $crate::storage::dispatch::run_mut(
            $op,
            $writes,
            $reads,
            |$be: &$crate::backend::cpu::Cpu, [$($w),+], [$($r),*]| $call,
            |$be: &$crate::backend::gpu::GpuDevice, [$($w),+], [$($r),*]| $call,
            |$be: &$crate::backend::cuda::CudaDevice, [$($w),+], [$($r),*]| $call,
        )
    };
}
pub(super) use on_backend_mut;

/// What a kernel returns, as storages: its memory, or an optional memory, or several (a
/// tuple, an array), each wrapped where it lives.
pub(super) trait IntoStorage {
    /// The same shape of result with every memory a [`Storage`].
    type Output;
    /// Wraps every memory.
    fn into_storage(self) -> Self::Output;
}

impl IntoStorage for CpuBuffer {
    type Output = triomphe::Arc<Storage>;
    fn into_storage(self) -> triomphe::Arc<Storage> {
        Storage::new(self)
    }
}

impl IntoStorage for GpuBuffer {
    type Output = triomphe::Arc<Storage>;
    fn into_storage(self) -> triomphe::Arc<Storage> {
        Storage::on_gpu(self)
    }
}

impl IntoStorage for CudaBuffer {
    type Output = triomphe::Arc<Storage>;
    fn into_storage(self) -> triomphe::Arc<Storage> {
        Storage::on_cuda(self)
    }
}

/// For kernels whose results leave through the closure (a cell), or that answer a question.
impl IntoStorage for () {
    type Output = ();
    fn into_storage(self) {}
}

impl<T: IntoStorage> IntoStorage for Option<T> {
    type Output = Option<T::Output>;
    fn into_storage(self) -> Self::Output {
        self.map(T::into_storage)
    }
}

impl<A: IntoStorage, B: IntoStorage> IntoStorage for (A, B) {
    type Output = (A::Output, B::Output);
    fn into_storage(self) -> Self::Output {
        (self.0.into_storage(), self.1.into_storage())
    }
}

impl<T: IntoStorage, const K: usize> IntoStorage for [T; K] {
    type Output = [T::Output; K];
    fn into_storage(self) -> Self::Output {
        self.map(T::into_storage)
    }
}

/// Per-operand state of one dispatch, on the stack for the few operands an op has.
type Few<T> = SmallVec<[T; 8]>;

/// Locks every operand's memory for reading, finds the backend they share, and runs its
/// kernel: `cpu` when all are on the host, `gpu` or `cuda` when all are on one such device
/// (rank-0 host operands joining as constants). Operands on different devices are an error
/// naming both.
///
/// The per-operand bookkeeping lives in arrays here: an op's dispatch is part of every tiny
/// op's cost (1,000 chained adds of 16 elements spend a third of their time in it otherwise).
pub(super) fn run<const N: usize, C, G, K, Out>(
    op: &'static str,
    operands: [Operand<'_>; N],
    cpu: impl FnOnce(&Cpu, [Src<'_, CpuBuffer>; N]) -> Result<C>,
    gpu: impl FnOnce(&GpuDevice, [Src<'_, GpuBuffer>; N]) -> Result<G>,
    cuda: impl FnOnce(&CudaDevice, [Src<'_, CudaBuffer>; N]) -> Result<K>,
) -> Result<Out>
where
    C: IntoStorage<Output = Out>,
    G: IntoStorage<Output = Out>,
    K: IntoStorage<Output = Out>,
{
    let mut owner = [0; N];
    let mut order = [0; N];
    let mut guards: [Option<RwLockReadGuard<'_, Memory>>; N] = std::array::from_fn(|_| None);
    let scratch = Scratch {
        owner: &mut owner,
        order: &mut order,
        guards: &mut guards,
    };
    dispatch(
        op,
        &operands,
        scratch,
        |be, src| cpu(be, std::array::from_fn(src)),
        |be, src| gpu(be, std::array::from_fn(src)),
        |be, src| cuda(be, std::array::from_fn(src)),
    )
}

/// [`run`] for any number of operands (a custom op's inputs), handed to the kernel in order.
pub(super) fn run_many<C, G, K, Out>(
    op: &'static str,
    operands: &[Operand<'_>],
    cpu: impl FnOnce(&Cpu, &[Src<'_, CpuBuffer>]) -> Result<C>,
    gpu: impl FnOnce(&GpuDevice, &[Src<'_, GpuBuffer>]) -> Result<G>,
    cuda: impl FnOnce(&CudaDevice, &[Src<'_, CudaBuffer>]) -> Result<K>,
) -> Result<Out>
where
    C: IntoStorage<Output = Out>,
    G: IntoStorage<Output = Out>,
    K: IntoStorage<Output = Out>,
{
    let n = operands.len();
    let mut owner: Few<usize> = SmallVec::from_elem(0, n);
    let mut order: Few<usize> = SmallVec::from_elem(0, n);
    let mut guards: Few<Option<RwLockReadGuard<'_, Memory>>> = (0..n).map(|_| None).collect();
    let scratch = Scratch {
        owner: &mut owner,
        order: &mut order,
        guards: &mut guards,
    };
    dispatch(
        op,
        operands,
        scratch,
        |be, src| cpu(be, &(0..n).map(src).collect::<Few<_>>()),
        |be, src| gpu(be, &(0..n).map(src).collect::<Few<_>>()),
        |be, src| cuda(be, &(0..n).map(src).collect::<Few<_>>()),
    )
}

/// One slot per operand for [`dispatch`]'s bookkeeping, kept by its caller (arrays for a
/// fixed count, small vectors for any count).
struct Scratch<'s, 'a> {
    /// The operand whose lock serves operand `k` (the first with the same storage).
    owner: &'s mut [usize],
    /// Operand indices in the one lock order.
    order: &'s mut [usize],
    /// The read locks, at each storage's first operand.
    guards: &'s mut [Option<RwLockReadGuard<'a, Memory>>],
}

/// A backend's kernel as [`dispatch`] calls it: operand `k` as a `Src` comes from calling
/// the function it is handed.
trait Kernel<B, M, R>: for<'m> FnOnce(&B, &'m dyn Fn(usize) -> Src<'m, M>) -> Result<R> {}
impl<B, M, R, F> Kernel<B, M, R> for F where
    F: for<'m> FnOnce(&B, &'m dyn Fn(usize) -> Src<'m, M>) -> Result<R>
{
}

/// The body of [`run`] and [`run_many`].
///
/// Read locks are taken in one global order (by storage address) and once per storage:
/// std's `RwLock` makes a new reader wait behind a waiting writer, so two threads taking
/// two locks in opposite orders, with writers queued on both, would wait for each other.
fn dispatch<'a, C, G, K, Out>(
    op: &'static str,
    operands: &[Operand<'a>],
    scratch: Scratch<'_, 'a>,
    cpu: impl Kernel<Cpu, CpuBuffer, C>,
    gpu: impl Kernel<GpuDevice, GpuBuffer, G>,
    cuda: impl Kernel<CudaDevice, CudaBuffer, K>,
) -> Result<Out>
where
    C: IntoStorage<Output = Out>,
    G: IntoStorage<Output = Out>,
    K: IntoStorage<Output = Out>,
{
    let Scratch {
        owner,
        order,
        guards,
    } = scratch;
    let n = operands.len();
    for k in 0..n {
        owner[k] = (0..k)
            .find(|&j| std::ptr::eq(operands[j].storage, operands[k].storage))
            .unwrap_or(k);
        order[k] = k;
    }
    match n {
        0 | 1 => {}
        // (A call of the general sort costs a two-operand op more than its comparison.)
        2 => {
            if operands[1].storage.lock_order() < operands[0].storage.lock_order() {
                order.swap(0, 1);
            }
        }
        _ => order.sort_unstable_by_key(|&k| operands[k].storage.lock_order()),
    }
    for &k in order.iter() {
        if owner[k] == k {
            guards[k] = Some(operands[k].storage.lock());
        }
    }
    let guards = &*guards;
    let memory = |k: usize| -> &Memory { guards[owner[k]].as_deref().expect("locked above") };

    if (0..n).all(|k| matches!(memory(k), Memory::Host(_))) {
        let src = |k: usize| match memory(k) {
            Memory::Host(buffer) => Src::new(buffer, operands[k].layout),
            _ => unreachable!("all on the host"),
        };
        return Ok(cpu(&Cpu, &src)?.into_storage());
    }
    Ok(match shared_device(op, operands, &memory)? {
        Device::Gpu(gpu_device) => with_constants(
            operands,
            &memory,
            Memory::gpu,
            |host, offset| gpu_device.constant(host, offset),
            |src| gpu(&gpu_device, src),
        )?
        .into_storage(),
        Device::Cuda(cuda_device) => with_constants(
            operands,
            &memory,
            Memory::cuda,
            |host, offset| cuda_device.constant(host, offset),
            |src| cuda(&cuda_device, src),
        )?
        .into_storage(),
        Device::Cpu => unreachable!("an operand is on a device"),
    })
}

/// Runs `kernel` on a device's operands, each rank-0 host operand uploaded (`constant`, once
/// per value: the device keeps them) and read through a broadcast of its single element.
fn with_constants<'g, M: BackendMemory + 'g, R>(
    operands: &[Operand<'_>],
    memory: &impl Fn(usize) -> &'g Memory,
    on_device: impl Fn(&'g Memory) -> Option<&'g M>,
    constant: impl Fn(&CpuBuffer, usize) -> Result<Arc<M>>,
    kernel: impl for<'m> FnOnce(&'m dyn Fn(usize) -> Src<'m, M>) -> Result<R>,
) -> Result<R> {
    let mut constants: Few<Option<(Arc<M>, Layout)>> = Few::new();
    for (k, operand) in operands.iter().enumerate() {
        constants.push(match memory(k) {
            Memory::Host(host) => {
                let layout = operand.layout;
                let value = constant(host, layout.offset())?;
                Some((value, Layout::contiguous(&[]).broadcast_to(layout.dims())))
            }
            _ => None,
        });
    }
    let src = |k: usize| match (on_device(memory(k)), &constants[k]) {
        (Some(buffer), _) => Src::new(buffer, operands[k].layout),
        (None, Some((buffer, layout))) => Src::new(&**buffer, layout),
        (None, None) => unreachable!("shared_device checked every operand"),
    };
    kernel(&src)
}

/// The device that holds the operands on one, when every other operand is a rank-0 host
/// tensor; otherwise the mismatch, naming both devices.
fn shared_device<'g>(
    op: &'static str,
    operands: &[Operand<'_>],
    memory: &impl Fn(usize) -> &'g Memory,
) -> Result<Device> {
    let n = operands.len();
    let on_devices = (0..n).map(memory).filter(|m| !matches!(m, Memory::Host(_)));
    let device = one_device(op, on_devices)?;
    if let Some(host) =
        (0..n).find(|&k| matches!(memory(k), Memory::Host(_)) && !operands[k].scalar)
    {
        return Err(DeviceError::Mismatch {
            op,
            lhs: device.to_string(),
            rhs: format!("cpu, shape {:?}", operands[host].layout.dims()),
        }
        .into());
    }
    Ok(device)
}

/// [`run`] for kernels that write some operands in place: `writes` are locked for writing
/// (their versions bumped after the kernel ran, so saved copies become stale), `reads` for
/// reading, all in the one lock order. Every operand must be on the same device, except that
/// a rank-0 host operand among the `reads` joins a device op as a constant, as in [`run`] (a
/// `fill_` of GPU memory). `None`, with nothing run, when two operands share a storage: the
/// caller then takes a path that reads a copy.
pub(super) fn run_mut<const W: usize, const R: usize, T>(
    op: &'static str,
    writes: [Operand<'_>; W],
    reads: [Operand<'_>; R],
    cpu: impl FnOnce(&Cpu, [Dst<'_, CpuBuffer>; W], [Src<'_, CpuBuffer>; R]) -> Result<T>,
    gpu: impl FnOnce(&GpuDevice, [Dst<'_, GpuBuffer>; W], [Src<'_, GpuBuffer>; R]) -> Result<T>,
    cuda: impl FnOnce(&CudaDevice, [Dst<'_, CudaBuffer>; W], [Src<'_, CudaBuffer>; R]) -> Result<T>,
) -> Result<Option<T>> {
    let storage = |k: usize| {
        if k < W {
            writes[k].storage
        } else {
            reads[k - W].storage
        }
    };
    let shared = (0..W + R).any(|k| (0..k).any(|j| std::ptr::eq(storage(j), storage(k))));
    if shared {
        return Ok(None);
    }
    let mut order: Vec<usize> = (0..W + R).collect();
    order.sort_unstable_by_key(|&k| storage(k).lock_order());
    let mut written: [Option<RwLockWriteGuard<'_, Memory>>; W] = std::array::from_fn(|_| None);
    let mut read: [Option<RwLockReadGuard<'_, Memory>>; R] = std::array::from_fn(|_| None);
    for k in order {
        if k < W {
            written[k] = Some(writes[k].storage.lock_write());
        } else {
            read[k - W] = Some(reads[k - W].storage.lock());
        }
    }
    let mut written = written.map(|guard| guard.expect("locked above"));
    let read = read.map(|guard| guard.expect("locked above"));
    let constant = |k: usize| reads[k].scalar && matches!(*read[k], Memory::Host(_));
    let device = one_device(
        op,
        written.iter().map(|m| &**m).chain(
            read.iter()
                .enumerate()
                .filter(|&(k, _)| !constant(k))
                .map(|(_, m)| &**m),
        ),
    )?;
    let result = match device {
        Device::Cpu => {
            let mut layouts = writes.iter().map(|w| w.layout);
            let dsts = written.each_mut().map(|m| match &mut **m {
                Memory::Host(memory) => Dst {
                    memory,
                    layout: layouts.next().expect("one layout per write"),
                },
                _ => unreachable!("all on the host"),
            });
            let srcs = std::array::from_fn(|k| match &*read[k] {
                Memory::Host(memory) => Src::new(memory, reads[k].layout),
                _ => unreachable!("all on the host"),
            });
            cpu(&Cpu, dsts, srcs)?
        }
        Device::Gpu(gpu_device) => in_place(
            (&writes, &mut written),
            (&reads, &read),
            Memory::gpu_mut,
            Memory::gpu,
            |host, offset| gpu_device.constant(host, offset),
            |dsts, srcs| gpu(&gpu_device, dsts, srcs),
        )?,
        Device::Cuda(cuda_device) => in_place(
            (&writes, &mut written),
            (&reads, &read),
            Memory::cuda_mut,
            Memory::cuda,
            |host, offset| cuda_device.constant(host, offset),
            |dsts, srcs| cuda(&cuda_device, dsts, srcs),
        )?,
    };
    for operand in &writes {
        operand.storage.mark_written();
    }
    Ok(Some(result))
}

/// The device half of [`run_mut`]: the written memories as `Dst`s, the read ones as `Src`s,
/// rank-0 host reads uploaded as constants.
#[allow(clippy::type_complexity)]
fn in_place<'g, M: BackendMemory, const W: usize, const R: usize, T>(
    (writes, written): (&[Operand<'_>; W], &'g mut [RwLockWriteGuard<'_, Memory>; W]),
    (reads, read): (&[Operand<'_>; R], &'g [RwLockReadGuard<'_, Memory>; R]),
    on_device_mut: impl Fn(&mut Memory) -> Option<&mut M>,
    on_device: impl Fn(&Memory) -> Option<&M>,
    constant: impl Fn(&CpuBuffer, usize) -> Result<Arc<M>>,
    kernel: impl FnOnce([Dst<'_, M>; W], [Src<'_, M>; R]) -> Result<T>,
) -> Result<T> {
    let mut constants: [Option<(Arc<M>, Layout)>; R] = std::array::from_fn(|_| None);
    for (k, slot) in constants.iter_mut().enumerate() {
        if let Memory::Host(host) = &*read[k] {
            let layout = reads[k].layout;
            let value = constant(host, layout.offset())?;
            *slot = Some((value, Layout::contiguous(&[]).broadcast_to(layout.dims())));
        }
    }
    let mut layouts = writes.iter().map(|w| w.layout);
    let dsts = written.each_mut().map(|m| Dst {
        memory: on_device_mut(m).expect("one_device checked"),
        layout: layouts.next().expect("one layout per write"),
    });
    let srcs = std::array::from_fn(|k| match (on_device(&read[k]), &constants[k]) {
        (Some(memory), _) => Src::new(memory, reads[k].layout),
        (None, Some((memory, layout))) => Src::new(&**memory, layout),
        (None, None) => unreachable!("one_device checked"),
    });
    kernel(dsts, srcs)
}

/// The one device holding every memory given (the host when none is given); two devices
/// among them are the mismatch error.
fn one_device<'m>(op: &'static str, memories: impl Iterator<Item = &'m Memory>) -> Result<Device> {
    let mut found: Option<Device> = None;
    for memory in memories {
        let device = memory.device();
        match &found {
            Some(seen) if *seen != device => {
                return Err(DeviceError::Mismatch {
                    op,
                    lhs: seen.to_string(),
                    rhs: device.to_string(),
                }
                .into());
            }
            _ => found = Some(device),
        }
    }
    Ok(found.unwrap_or(Device::Cpu))
}
