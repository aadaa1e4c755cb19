//! Tensor memory. A [`Storage`] is shared by every view of it through an `Arc`; its version
//! counter goes up on each in-place write so the tape can refuse stale saved tensors.
//! Memory lives on the host or on a GPU; CPU kernels read host memory, GPU kernels read
//! device buffers, and nothing moves between the two unless a transfer is asked for (or a
//! host-only path reads a GPU tensor, which `backend::gpu::transfer_counts` counts).

use std::mem::MaybeUninit;
use std::ops::Deref;
use std::ptr::addr_of_mut;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};

use crate::backend::cuda::CudaBuffer;
use crate::backend::gpu::GpuBuffer;
use crate::device::Device;
use crate::dtype::DType;
use crate::error::{DeviceError, Result};
use crate::live_counts::{self, Count};
use triomphe::Arc;

mod allocate;
mod attention;
mod custom;
mod dispatch;
mod elementwise;
mod index;
mod int8;
mod join;
mod loss;
mod matmul;
mod norm;
mod optim;
mod reduce;
mod sparse;
mod update;
mod window;

pub use crate::backend::cpu::CpuBuffer;
pub(crate) use crate::backend::cpu::map_buffer;
pub(crate) use dispatch::Operand;
pub(crate) use int8::Int8Resident;

/// Bytes held by all live tensor storages of this process. Tests use it to prove that
/// forward passes which are never back-propagated release their memory.
pub fn live_storage_bytes() -> usize {
    live_counts::total(Count::StorageBytes)
}

/// The most bytes that live tensor storages of this process held at once, from
/// [`StoragePeak::start`] until now: what a training step needs at its busiest moment (the
/// activations the graph keeps, plus the gradients of the backward pass).
///
/// While one is alive every allocation sums the per-thread byte counts under a lock, so it
/// is for tests and measurements. Two alive at once share one high-water mark.
pub struct StoragePeak(live_counts::PeakWatch);

impl StoragePeak {
    /// Starts from the bytes held now.
    pub fn start() -> Self {
        StoragePeak(live_counts::PeakWatch::start())
    }

    /// The high-water mark in bytes since [`StoragePeak::start`].
    pub fn bytes(&self) -> usize {
        self.0.peak(Count::StorageBytes)
    }
}

/// Where the elements are.
#[derive(Debug)]
pub enum Memory {
    /// In host memory.
    Host(CpuBuffer),
    /// In a buffer on a GPU (wgpu).
    Gpu(GpuBuffer),
    /// In memory of a CUDA device.
    Cuda(CudaBuffer),
}

impl Memory {
    /// The wgpu buffer, for memory on a wgpu GPU.
    fn gpu(&self) -> Option<&GpuBuffer> {
        match self {
            Memory::Gpu(buffer) => Some(buffer),
            _ => None,
        }
    }

    fn gpu_mut(&mut self) -> Option<&mut GpuBuffer> {
        match self {
            Memory::Gpu(buffer) => Some(buffer),
            _ => None,
        }
    }

    /// The CUDA buffer, for memory on a CUDA device.
    fn cuda(&self) -> Option<&CudaBuffer> {
        match self {
            Memory::Cuda(buffer) => Some(buffer),
            _ => None,
        }
    }

    fn cuda_mut(&mut self) -> Option<&mut CudaBuffer> {
        match self {
            Memory::Cuda(buffer) => Some(buffer),
            _ => None,
        }
    }

    /// The device holding the memory.
    fn device(&self) -> Device {
        match self {
            Memory::Host(_) => Device::Cpu,
            Memory::Gpu(buffer) => Device::Gpu(buffer.device()),
            Memory::Cuda(buffer) => Device::Cuda(buffer.device()),
        }
    }

    /// A copy of `host` as memory of `device` (uploaded to a GPU: an asked-for transfer).
    fn copied_to(device: &Device, host: &CpuBuffer) -> Result<Memory> {
        Ok(match device {
            Device::Cpu => Memory::Host(host.clone()),
            Device::Gpu(gpu) => Memory::Gpu(crate::backend::gpu::upload_buffer(gpu, host)?),
            Device::Cuda(cuda) => Memory::Cuda(crate::backend::cuda::upload(cuda, host)?),
        })
    }

    /// Elements `range` in host memory (read back from a device: an asked-for transfer).
    fn host_range(&self, range: std::ops::Range<usize>) -> Result<CpuBuffer> {
        match self {
            Memory::Host(buffer) => {
                Ok(crate::backend::cpu::map_buffer!(buffer, |v| v[range].to_vec()))
            }
            Memory::Gpu(buffer) => crate::backend::gpu::download_asked(buffer, range),
            Memory::Cuda(buffer) => crate::backend::cuda::download(buffer, range),
        }
    }
}

/// Host elements for a CPU kernel: the buffer itself, or a copy read back from a GPU for a
/// host-only path (counted as a fallback transfer).
pub enum HostView<'a> {
    /// The storage's own host buffer, under its read lock.
    Borrowed(RwLockReadGuard<'a, Memory>),
    /// A host copy of GPU memory.
    Downloaded(CpuBuffer),
}

impl Deref for HostView<'_> {
    type Target = CpuBuffer;

    fn deref(&self) -> &CpuBuffer {
        match self {
            HostView::Borrowed(guard) => match &**guard {
                Memory::Host(buffer) => buffer,
                Memory::Gpu(_) | Memory::Cuda(_) => {
                    unreachable!("read() downloads device memory under the same lock")
                }
            },
            HostView::Downloaded(buffer) => buffer,
        }
    }
}

/// Write access to host elements (the storage's lock held).
pub struct HostWrite<'a>(RwLockWriteGuard<'a, Memory>);

impl Deref for HostWrite<'_> {
    type Target = CpuBuffer;

    fn deref(&self) -> &CpuBuffer {
        match &*self.0 {
            Memory::Host(buffer) => buffer,
            Memory::Gpu(_) | Memory::Cuda(_) => unreachable!("write() checks for host memory"),
        }
    }
}

impl std::ops::DerefMut for HostWrite<'_> {
    fn deref_mut(&mut self) -> &mut CpuBuffer {
        match &mut *self.0 {
            Memory::Host(buffer) => buffer,
            Memory::Gpu(_) | Memory::Cuda(_) => unreachable!("write() checks for host memory"),
        }
    }
}

/// Reference-counted tensor memory with a version counter. The memory sits behind a lock so
/// it can move between devices in place ([`Storage::relocate`]): a model moved to a GPU keeps
/// its parameters' identities, and with them an optimizer's hold on them.
#[derive(Debug)]
pub struct Storage {
    memory: RwLock<Memory>,
    /// Whether `memory` is on a device (not the host), readable without the lock.
    on_gpu: AtomicBool,
    version: AtomicU64,
    /// The dtype's code ([`dtype_code`]); it changes only in [`Storage::adopt`].
    dtype: AtomicU8,
    bytes: AtomicUsize,
    /// For a small index tensor uploaded to a GPU, the host elements it was uploaded from,
    /// kept while nothing has written the storage (version 0): reading the labels back (to
    /// check them, as `cross_entropy` does) then needs no wait for the GPU's queue.
    /// Boxed: kept for few storages, and a smaller `Storage` moves without a `memcpy`.
    uploaded_from: Option<Box<CpuBuffer>>,
}

/// Largest index tensor whose host elements an upload keeps (64 Ki labels).
const MAX_KEPT_UPLOAD_BYTES: usize = 1 << 19;

/// `dtype` as the byte [`Storage`] keeps it in, so that a module can change its parameters'
/// dtype in place.
fn dtype_code(dtype: DType) -> u8 {
    match dtype {
        DType::F32 => 0,
        DType::F64 => 1,
        DType::F16 => 2,
        DType::I64 => 3,
        DType::Bool => 4,
        DType::BF16 => 5,
    }
}

fn dtype_of_code(code: u8) -> DType {
    match code {
        0 => DType::F32,
        1 => DType::F64,
        2 => DType::F16,
        3 => DType::I64,
        5 => DType::BF16,
        _ => DType::Bool,
    }
}

impl Storage {
    /// Host memory holding `buffer`, at version 0, ready to share.
    pub(crate) fn new(buffer: CpuBuffer) -> Arc<Self> {
        let dtype = buffer.dtype();
        Self::shared(buffer.len(), dtype, Memory::Host(buffer))
    }

    /// Memory on a GPU.
    pub(crate) fn on_gpu(buffer: GpuBuffer) -> Arc<Self> {
        let (len, dtype) = (buffer.len(), buffer.dtype());
        Self::shared(len, dtype, Memory::Gpu(buffer))
    }

    /// Memory on a CUDA device.
    pub(crate) fn on_cuda(buffer: CudaBuffer) -> Arc<Self> {
        let (len, dtype) = (buffer.len(), buffer.dtype());
        Self::shared(len, dtype, Memory::Cuda(buffer))
    }

    /// `storage`, device memory just uploaded from `host` (the same elements); a small `i64`
    /// tensor keeps them for [`Storage::uploaded_elements`], so checking labels on the host
    /// needs no wait for the device.
    pub(crate) fn uploaded(mut storage: Arc<Storage>, host: &CpuBuffer) -> Arc<Storage> {
        if let CpuBuffer::I64(values) = host
            && values.len() * 8 <= MAX_KEPT_UPLOAD_BYTES
            && let Some(fresh) = Arc::get_mut(&mut storage)
        {
            fresh.uploaded_from = Some(Box::new(CpuBuffer::I64(values.clone())));
        }
        storage
    }

    /// The host elements this device memory was uploaded from, when it kept them and nothing
    /// has written it since.
    pub(crate) fn uploaded_elements(&self) -> Option<&CpuBuffer> {
        self.uploaded_from
            .as_deref()
            .filter(|_| self.version() == 0 && self.is_on_gpu())
    }

    /// `memory` at version 0, written straight into its shared allocation: every op's result
    /// comes through here, and building the struct on the stack to move it into the heap
    /// cost a `memcpy` and a store-forwarding stall per op.
    #[inline]
    fn shared(len: usize, dtype: DType, memory: Memory) -> Arc<Self> {
        let bytes = len * dtype.size_in_bytes();
        live_counts::add(Count::StorageBytes, bytes as isize);
        let on_gpu = !matches!(memory, Memory::Host(_));
        let mut fresh = Arc::<MaybeUninit<Storage>>::new_uninit();
        let place = fresh.as_mut_ptr().cast::<Storage>();
        // SAFETY: `place` is the fresh allocation's uninitialised `Storage`, reachable only
        // from here; every field is written before `assume_init`.
        unsafe {
            // An empty lock first, then `memory` moved into it: `RwLock::new(memory)` went
            // through a stack temporary copied with misaligned loads (another stall).
            let lock = addr_of_mut!((*place).memory);
            lock.write(RwLock::new(Memory::Host(CpuBuffer::Bool(Vec::new()))));
            // The placeholder owns no heap memory, so overwriting it leaks nothing.
            std::ptr::write(
                (*lock).get_mut().unwrap_or_else(PoisonError::into_inner),
                memory,
            );
            addr_of_mut!((*place).on_gpu).write(AtomicBool::new(on_gpu));
            addr_of_mut!((*place).version).write(AtomicU64::new(0));
            addr_of_mut!((*place).dtype).write(AtomicU8::new(dtype_code(dtype)));
            addr_of_mut!((*place).bytes).write(AtomicUsize::new(bytes));
            addr_of_mut!((*place).uploaded_from).write(None);
            fresh.assume_init()
        }
    }

    fn lock_write(&self) -> RwLockWriteGuard<'_, Memory> {
        self.memory
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    #[inline]
    fn lock(&self) -> RwLockReadGuard<'_, Memory> {
        self.memory
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The dtype of the elements (lock-free; it changes only when `Module::to_dtype`
    /// converts a parameter in place).
    pub fn dtype(&self) -> DType {
        dtype_of_code(self.dtype.load(Ordering::Acquire))
    }

    /// This storage's place in the one order in which code that holds several storages'
    /// locks at once must take them (its address: unique while it lives). Taking locks in
    /// argument order instead lets two threads each wait for the other's.
    pub(crate) fn lock_order(&self) -> usize {
        std::ptr::from_ref(self).addr()
    }

    /// Whether the elements are on a GPU, through wgpu or CUDA (no lock taken).
    pub fn is_on_gpu(&self) -> bool {
        self.on_gpu.load(Ordering::Acquire)
    }

    /// The device holding the elements.
    pub fn device(&self) -> Device {
        self.lock().device()
    }

    /// Elements `range` of the memory in host memory: a copy, read back from a device (an
    /// asked-for transfer).
    pub(crate) fn host_range(&self, range: std::ops::Range<usize>) -> Result<CpuBuffer> {
        self.lock().host_range(range)
    }

    /// `f` of the GPU buffer, for storages on a GPU (under the storage's read lock).
    pub fn with_gpu<R>(&self, f: impl FnOnce(&GpuBuffer) -> R) -> Option<R> {
        match &*self.lock() {
            Memory::Gpu(buffer) => Some(f(buffer)),
            Memory::Host(_) | Memory::Cuda(_) => None,
        }
    }

    /// Host elements. For GPU memory this reads the whole buffer back (a counted fallback
    /// transfer; ops with GPU kernels never get here), which fails when the GPU does (a
    /// lost device, a wait past its limit).
    #[inline]
    pub fn read(&self) -> Result<HostView<'_>> {
        let guard = self.lock();
        Ok(match &*guard {
            Memory::Host(_) => HostView::Borrowed(guard),
            Memory::Gpu(buffer) => HostView::Downloaded(buffer.read_back_fallback()?),
            Memory::Cuda(buffer) => {
                HostView::Downloaded(crate::backend::cuda::download(buffer, 0..buffer.len())?)
            }
        })
    }

    /// Write access to host memory; bumps the version so saved copies of this memory become
    /// stale. GPU memory is written by GPU kernels, through [`Storage::mark_written`].
    pub fn write(&self) -> Result<HostWrite<'_>> {
        let guard = self
            .memory
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match &*guard {
            Memory::Host(_) => {
                self.mark_written();
                Ok(HostWrite(guard))
            }
            Memory::Gpu(_) | Memory::Cuda(_) => Err(DeviceError::HostWriteToGpu.into()),
        }
    }

    /// Moves the elements to `device` in place (nothing happens when they are there).
    pub fn relocate(&self, device: &Device) -> Result<()> {
        let mut guard = self
            .memory
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if guard.device() == *device {
            return Ok(());
        }
        let len = self.len();
        let moved = match (&*guard, device) {
            (Memory::Host(host), _) => Memory::copied_to(device, host)?,
            (memory, Device::Cpu) => Memory::Host(memory.host_range(0..len)?),
            (memory, _) => Memory::copied_to(device, &memory.host_range(0..len)?)?,
        };
        self.on_gpu
            .store(!matches!(moved, Memory::Host(_)), Ordering::Release);
        *guard = moved;
        Ok(())
    }

    /// Takes over `source`'s memory and dtype in place (for `Module::to_dtype`: a parameter
    /// converted to another dtype keeps its identity, like one moved to another device).
    /// `source` must hold as many elements as `self`; it gets `self`'s old memory, freed
    /// when it drops. Bumps the version, so graphs that saved the old values refuse to
    /// back-propagate.
    pub(crate) fn adopt(&self, source: Storage) {
        let mut source = source;
        let mut guard = self
            .memory
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        std::mem::swap(
            &mut *guard,
            source
                .memory
                .get_mut()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        let (own_dtype, own_bytes) = (self.dtype.load(Ordering::Acquire), self.byte_len());
        self.dtype
            .store(source.dtype.load(Ordering::Acquire), Ordering::Release);
        self.bytes.store(source.byte_len(), Ordering::Release);
        source.dtype.store(own_dtype, Ordering::Release);
        source.bytes.store(own_bytes, Ordering::Release);
        self.on_gpu
            .store(!matches!(*guard, Memory::Host(_)), Ordering::Release);
        self.mark_written();
    }

    /// Number of elements held.
    pub(crate) fn len(&self) -> usize {
        self.byte_len() / self.dtype().size_in_bytes()
    }

    /// Bytes of memory held.
    pub(crate) fn byte_len(&self) -> usize {
        self.bytes.load(Ordering::Acquire)
    }

    /// Bumps the version for an in-place write made by a GPU kernel.
    pub fn mark_written(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// Number of in-place writes so far; a saved tensor whose version has moved is stale.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }
}

impl Drop for Storage {
    fn drop(&mut self) {
        let bytes = self.byte_len();
        live_counts::add(Count::StorageBytes, -(bytes as isize));
        let memory = self
            .memory
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Memory::Host(buffer) = memory else {
            return;
        };
        if bytes >= crate::backend::cpu::pool::MIN_POOLED_BYTES {
            let empty = CpuBuffer::Bool(Vec::new());
            crate::backend::cpu::pool::recycle(std::mem::replace(buffer, empty));
        } else if let CpuBuffer::F32(values) = buffer {
            // Kept only when tiny (`give_back` decides).
            crate::backend::cpu::small_buffers::give_back(std::mem::take(values));
        }
    }
}
