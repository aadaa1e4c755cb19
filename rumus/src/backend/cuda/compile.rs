//! The kernel sources and their compilation. A module is `shaders/cuda/<name>.cu` preceded by
//! the op codes (generated here from backend/kinds.rs, so the Rust enums and the CUDA switch
//! statements cannot drift) and `shaders/cuda/common.cuh`. NVRTC compiles it to PTX for the
//! device's architecture the first time one of its kernels runs; the driver loads it once per
//! device and keeps it, with each kernel's handle, for the life of the process.

use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex};

use cudarc::driver::{result, sys};
use cudarc::nvrtc::{CompileError, CompileOptions, compile_ptx_with_opts};

use super::context::{CudaDevice, cuda_error};
use crate::backend::kinds::{BinaryOp, CompareOp, UnaryOp};
use crate::error::{DeviceError, Result};

/// What every module starts with after the op codes.
const COMMON: &str = include_str!("../../../shaders/cuda/common.cuh");

/// Every module: its name and source.
const MODULES: &[(&str, &str)] = &[
    (
        "attention",
        include_str!("../../../shaders/cuda/attention.cu"),
    ),
    (
        "elementwise",
        include_str!("../../../shaders/cuda/elementwise.cu"),
    ),
    ("index", include_str!("../../../shaders/cuda/index.cu")),
    ("loss", include_str!("../../../shaders/cuda/loss.cu")),
    ("norm", include_str!("../../../shaders/cuda/norm.cu")),
    ("optim", include_str!("../../../shaders/cuda/optim.cu")),
    ("reduce", include_str!("../../../shaders/cuda/reduce.cu")),
    ("sparse", include_str!("../../../shaders/cuda/sparse.cu")),
    ("window", include_str!("../../../shaders/cuda/window.cu")),
];

/// `#define UNARY_RELU 8` and the like, for every op code kernels switch on.
fn op_code_defines() -> String {
    let mut defines = String::new();
    let mut define = |family: &str, name: &str, code: u32| {
        defines.push_str(&format!("#define {family}_{} {code}\n", name.to_uppercase()));
    };
    for op in UnaryOp::ALL {
        define("UNARY", op.name(), op.code());
    }
    for op in BinaryOp::ALL {
        define("BINARY", op.name(), op.code());
    }
    for op in CompareOp::ALL {
        define("COMPARE", op.name(), op.code());
    }
    for (code, kind) in super::reduce::REDUCTIONS.iter().enumerate() {
        define("REDUCTION", kind.name(), code as u32);
    }
    defines
}

/// The whole text NVRTC compiles for module `name`.
fn module_source(name: &str) -> Option<String> {
    let (_, body) = MODULES.iter().find(|(module, _)| *module == name)?;
    Some(format!("{}\n{COMMON}\n{body}", op_code_defines()))
}

/// Module `name` compiled to PTX for `arch` (`compute_90`).
fn compile(name: &str, arch: &str) -> Result<String> {
    let source = module_source(name).expect("kernels name modules of MODULES");
    let options = CompileOptions {
        options: vec![format!("--gpu-architecture={arch}")],
        name: Some(format!("{name}.cu")),
        ..Default::default()
    };
    let failed = |why: String| -> crate::Error {
        DeviceError::Cuda {
            message: format!("NVRTC could not compile shaders/cuda/{name}.cu for {arch}: {why}"),
        }
        .into()
    };
    match compile_ptx_with_opts(source, options) {
        Ok(ptx) => Ok(ptx.to_src()),
        Err(CompileError::CompileError { log, .. }) => {
            Err(failed(log.to_string_lossy().into_owned()))
        }
        Err(other) => Err(failed(other.to_string())),
    }
}

/// Compiles every kernel module for the virtual architecture `arch` (`"compute_80"`,
/// `"compute_90"`) with NVRTC, which needs no GPU: how CI proves that every CUDA kernel
/// compiles. Returns how many modules compiled.
pub fn compile_every_kernel(arch: &str) -> Result<usize> {
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(DeviceError::NoCuda {
            reason: "NVRTC (libnvrtc.so.13) was not found".into(),
        }
        .into());
    }
    for (name, _) in MODULES {
        compile(name, arch)?;
    }
    Ok(MODULES.len())
}

/// A kernel's handle, valid while its device's context lives, and its entry point.
#[derive(Clone, Copy)]
pub(crate) struct Kernel {
    pub function: sys::CUfunction,
    pub entry: EntryPoint,
}

impl Kernel {
    /// The entry point's name (`unary_f32`).
    pub fn name(&self) -> String {
        let (_, name, suffixes) = self.entry;
        let mut full = name.to_owned();
        for suffix in suffixes.iter().filter(|s| !s.is_empty()) {
            full.push('_');
            full.push_str(suffix);
        }
        full
    }
}



/// A loaded module (its kernels are looked up once each and kept by [`Kernels`]).
struct Loaded {
    module: sys::CUmodule,
}

// SAFETY: CUDA module and function handles may be used from any thread whose current
// context is theirs (every use binds the device's context first).
unsafe impl Send for Loaded {}
unsafe impl Sync for Loaded {}
unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

/// The modules a device has loaded, by name.
#[derive(Default)]
pub(crate) struct Modules(Mutex<HashMap<&'static str, Arc<Loaded>>>);

impl Drop for Modules {
    fn drop(&mut self) {
        let loaded = self.0.get_mut().unwrap_or_else(|p| p.into_inner());
        for module in loaded.values() {
            // SAFETY: the context outlives its modules (the field order of `Context`), and
            // no kernel of a dropped device can run any more.
            let _ = unsafe { result::module::unload(module.module) };
        }
    }
}

/// A kernel's entry point: its module, its base name and up to two dtype suffixes
/// (`("elementwise", "cast", ["f32", "i64"])` is `cast_f32_i64`), all static, so finding a
/// kernel that ran before allocates nothing.
pub(crate) type EntryPoint = (&'static str, &'static str, [&'static str; 2]);

/// The kernels each device has looked up, by entry point.
#[derive(Default)]
pub(crate) struct Kernels(Mutex<HashMap<EntryPoint, Kernel>>);

impl CudaDevice {
    /// Kernel `name` of `module` with `suffixes` appended (empty ones skipped), compiling and
    /// loading the module on first use.
    pub(crate) fn kernel(
        &self,
        module: &'static str,
        name: &'static str,
        suffixes: [&'static str; 2],
    ) -> Result<Kernel> {
        let key = (module, name, suffixes);
        let mut known = self.0.kernels.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(kernel) = known.get(&key) {
            return Ok(*kernel);
        }
        let mut kernel = Kernel {
            function: std::ptr::null_mut(),
            entry: key,
        };
        kernel.function = self.function(module, &kernel.name())?;
        known.insert(key, kernel);
        Ok(kernel)
    }

    /// Function `name` of module `module`, compiling and loading the module on first use.
    fn function(&self, module: &'static str, name: &str) -> Result<sys::CUfunction> {
        let loaded = self.module(module)?;
        let c_name = CString::new(name).expect("kernel names have no NUL");
        // SAFETY: the module is loaded in this device's context, bound by `module`.
        let function = unsafe { result::module::get_function(loaded.module, c_name) }
            .map_err(|e| cuda_error(&format!("finding kernel {name} in {module}.cu"), e))?;
        Ok(function)
    }

    fn module(&self, name: &'static str) -> Result<Arc<Loaded>> {
        let mut modules = self.0.modules.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(loaded) = modules.get(name) {
            return Ok(loaded.clone());
        }
        let (major, minor) = self.compute_capability();
        let ptx = compile(name, &format!("compute_{major}{minor}"))?;
        let image = CString::new(ptx).expect("PTX has no NUL");
        self.bind()?;
        // SAFETY: a NUL-terminated PTX image, loaded into the bound context.
        let module = unsafe { result::module::load_data(image.as_ptr().cast()) }
            .map_err(|e| cuda_error(&format!("loading {name}.cu's PTX"), e))?;
        let loaded = Arc::new(Loaded { module });
        modules.insert(name, loaded.clone());
        Ok(loaded)
    }
}
