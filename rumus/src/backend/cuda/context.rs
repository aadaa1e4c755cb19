//! Opening an NVIDIA GPU: the device's primary context, the one stream its kernels run on,
//! its compiled kernel modules and its cuBLASLt state, shared by every tensor on it through
//! [`CudaDevice`], a cheap handle.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::{CudaContext, CudaStream, DriverError, result, sys};

use super::compile::{Kernels, Modules};
use super::profile::Profile;
use super::matmul::Blas;
use super::memory::CudaBuffer;
use crate::backend::cpu::CpuBuffer;
use crate::dtype::DType;
use crate::error::{DeviceError, Result};

/// Everything one opened CUDA device owns. Fields drop in order: what lives in the context
/// (modules, cuBLASLt state, buffers) before the stream, the stream before the context.
pub(crate) struct Context {
    pub profile: Mutex<Profile>,
    pub kernels: Kernels,
    pub modules: Modules,
    pub blas: Mutex<Option<Blas>>,
    /// Host scalars (rank-0 tensors) that joined ops here, uploaded once per value.
    pub constants: Mutex<HashMap<(DType, u64), Arc<CudaBuffer>>>,
    pub name: String,
    pub ordinal: usize,
    /// `(major, minor)`: what NVRTC compiles for.
    pub compute_capability: (i32, i32),
    /// A device word kernels raise when an input was invalid (`FAULT_*` in common.cuh);
    /// read, reported and cleared at each wait for the device.
    pub fault: sys::CUdeviceptr,
    pub stream: Arc<CudaStream>,
    pub ctx: Arc<CudaContext>,
}

/// A handle to an opened CUDA device. Clones are the same device; tensors on it compare
/// equal devices.
#[derive(Clone)]
pub struct CudaDevice(pub(crate) Arc<Context>);

impl PartialEq for CudaDevice {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CudaDevice({}, {:?})", self.0.ordinal, self.0.name)
    }
}

/// The driver's error as rumus's, saying what was being done.
pub(crate) fn cuda_error(doing: &str, error: impl fmt::Display) -> crate::Error {
    DeviceError::Cuda {
        message: format!("{doing}: {error}"),
    }
    .into()
}

/// Devices opened so far, by ordinal: each is opened once per process.
static OPENED: OnceLock<Mutex<HashMap<usize, CudaDevice>>> = OnceLock::new();

/// Largest number of distinct host scalars kept uploaded; past it the cache starts over.
const MAX_CONSTANTS: usize = 4096;

impl CudaDevice {
    /// The CUDA device of this ordinal (0 is the first), opened once per process. Fails with
    /// [`DeviceError::NoCuda`] where the driver or a CUDA library is missing or no such
    /// device exists.
    pub fn open(ordinal: usize) -> Result<CudaDevice> {
        let opened = OPENED.get_or_init(Default::default);
        let mut opened = opened.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(device) = opened.get(&ordinal) {
            return Ok(device.clone());
        }
        let device = open(ordinal).map_err(|reason| DeviceError::NoCuda { reason })?;
        opened.insert(ordinal, device.clone());
        Ok(device)
    }

    /// The device's name as the driver reports it ("NVIDIA H100 80GB HBM3").
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> usize {
        self.0.ordinal
    }

    /// `(major, minor)` compute capability (`(9, 0)` for Hopper).
    pub fn compute_capability(&self) -> (i32, i32) {
        self.0.compute_capability
    }

    /// Waits until every kernel queued on the device has finished; the error a kernel
    /// raised, if one did.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        self.0
            .stream
            .synchronize()
            .map_err(|e| cuda_error("waiting for the device", e))?;
        self.take_fault()
    }

    /// The error a kernel raised through the fault word since the last wait, if one did
    /// (the word is cleared). Call with the stream idle.
    fn take_fault(&self) -> Result<()> {
        let mut word = [0i32];
        // SAFETY: the fault word is 4 bytes of this context's memory and the stream is idle.
        unsafe { result::memcpy_dtoh_sync(&mut word, self.0.fault) }
            .map_err(|e| cuda_error("reading the fault word", e))?;
        if word[0] == 0 {
            return Ok(());
        }
        // SAFETY: as above.
        unsafe { result::memset_d8_sync(self.0.fault, 0, 4) }
            .map_err(|e| cuda_error("clearing the fault word", e))?;
        Err(DeviceError::Cuda {
            message: "an index was out of range in an indexing op (gather, index_select, index_add, scatter_add, embedding) since the last wait for the device; the elements it named were skipped: every index must be in 0..len of its axis".into(),
        }
        .into())
    }

    /// The fault word's address, for kernels that check their inputs.
    pub(crate) fn fault_word(&self) -> sys::CUdeviceptr {
        self.0.fault
    }

    /// Makes the device's context current on this thread (the driver API acts on the
    /// current context; each thread starts with none).
    pub(crate) fn bind(&self) -> Result<()> {
        self.0
            .ctx
            .bind_to_thread()
            .map_err(|e| cuda_error("binding the device's context", e))
    }

    /// The stream every kernel of this device is queued on.
    pub(crate) fn raw_stream(&self) -> sys::CUstream {
        self.0.stream.cu_stream()
    }

    /// The element `offset` of a host buffer as a one-element buffer here (a rank-0 host
    /// tensor joining an op), uploaded once per value.
    pub(crate) fn constant(&self, host: &CpuBuffer, offset: usize) -> Result<Arc<CudaBuffer>> {
        let one = crate::backend::cpu::map_buffer!(host, |v| vec![v[offset]]);
        let key = (one.dtype(), scalar_bits(&one));
        let mut constants = self.0.constants.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(buffer) = constants.get(&key) {
            return Ok(buffer.clone());
        }
        if constants.len() >= MAX_CONSTANTS {
            constants.clear();
        }
        let buffer = Arc::new(super::upload(self, &one)?);
        constants.insert(key, buffer.clone());
        Ok(buffer)
    }
}

/// Opens device `ordinal`, or says why it cannot be.
fn open(ordinal: usize) -> std::result::Result<CudaDevice, String> {
    // SAFETY: these only try to load the libraries (dlopen), calling nothing in them.
    let present = unsafe {
        [
            (cudarc::driver::sys::is_culib_present(), "the NVIDIA driver's libcuda.so"),
            (cudarc::nvrtc::sys::is_culib_present(), "NVRTC (libnvrtc.so.13)"),
            (cudarc::cublaslt::sys::is_culib_present(), "cuBLASLt (libcublasLt.so.13)"),
        ]
    };
    if let Some((_, missing)) = present.iter().find(|(found, _)| !found) {
        return Err(format!("{missing} was not found"));
    }
    let driver = |e: DriverError| e.to_string();
    let count = CudaContext::device_count().map_err(driver)?;
    if ordinal >= count.max(0) as usize {
        return Err(format!(
            "there is no CUDA device {ordinal}: the driver reports {count}"
        ));
    }
    let ctx = CudaContext::new(ordinal).map_err(driver)?;
    // SAFETY: one stream per device, so the stream order alone orders every use of a
    // buffer; the events cudarc would record per buffer buy nothing.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().map_err(driver)?;
    keep_freed_memory(&ctx).map_err(driver)?;
    let name = ctx.name().map_err(driver)?;
    let compute_capability = ctx.compute_capability().map_err(driver)?;
    // SAFETY: the context is current (CudaContext::new binds it); 4 bytes, zeroed before any
    // kernel can read them, freed with the context.
    let fault = unsafe {
        let word = result::malloc_sync(4).map_err(driver)?;
        result::memset_d8_sync(word, 0, 4).map_err(driver)?;
        word
    };
    Ok(CudaDevice(Arc::new(Context {
        fault,
        ctx,
        stream,
        name,
        ordinal,
        compute_capability,
        profile: Mutex::default(),
        kernels: Kernels::default(),
        modules: Modules::default(),
        blas: Mutex::new(None),
        constants: Mutex::new(HashMap::new()),
    })))
}

/// Raises the release threshold of the device's default memory pool to everything: memory
/// freed on the stream then stays in the pool for the next allocation instead of going back
/// to the driver at each synchronisation (a training step allocates the same sizes again).
fn keep_freed_memory(ctx: &CudaContext) -> std::result::Result<(), DriverError> {
    // SAFETY: the context is current on this thread (CudaContext::new binds it) and the
    // attribute takes a u64.
    unsafe {
        let pool = result::device::get_default_mem_pool(ctx.cu_device())?;
        let mut threshold = u64::MAX;
        result::mem_pool::set_attribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&raw mut threshold).cast(),
        )
    }
}

/// The bits of a one-element buffer's value, the key its upload is kept under.
fn scalar_bits(one: &CpuBuffer) -> u64 {
    match one {
        CpuBuffer::F32(v) => u64::from(v[0].to_bits()),
        CpuBuffer::F64(v) => v[0].to_bits(),
        CpuBuffer::F16(v) => u64::from(v[0].to_bits()),
        CpuBuffer::BF16(v) => u64::from(v[0].to_bits()),
        CpuBuffer::I64(v) => v[0] as u64,
        CpuBuffer::Bool(v) => u64::from(v[0]),
    }
}
