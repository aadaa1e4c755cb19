//! Error types. Everything a user can trigger (a shape at a boundary, a bad index, a missing
//! gradient, a mutation after recording) surfaces as one of these, never as a panic.

use crate::dtype::DType;

/// Convenience alias used throughout rumus.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A shape disagreement, found where data enters a typed tensor or where a dynamic op is called.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// One axis has the wrong size.
    #[error("{context}: axis {axis} has size {found}, expected {expected}")]
    AxisMismatch {
        /// What was being checked (an op, a layer, a loader).
        context: String,
        /// The axis, counted from 0.
        axis: usize,
        /// The size that was required.
        expected: usize,
        /// The size that was given.
        found: usize,
    },
    /// The number of axes is wrong.
    #[error(
        "{context}: expected a rank-{expected} tensor {expected_shape}, got rank {found} with shape {found_shape:?}"
    )]
    RankMismatch {
        /// What was being checked.
        context: String,
        /// The required number of axes.
        expected: usize,
        /// The required layout in words, e.g. `[N, C, H, W]`.
        expected_shape: String,
        /// The number of axes given.
        found: usize,
        /// The shape given.
        found_shape: Vec<usize>,
    },
    /// A buffer or reshape does not have the number of elements the shape asks for.
    #[error("{context}: shape {shape:?} holds {expected} elements but {found} were given")]
    ElementCount {
        /// What was being built.
        context: String,
        /// The requested shape.
        shape: Vec<usize>,
        /// Number of elements the shape holds.
        expected: usize,
        /// Number of elements given.
        found: usize,
    },
    /// Two shapes cannot be broadcast together (NumPy rules: sizes must match or be 1).
    #[error(
        "{context}: shapes {lhs:?} and {rhs:?} cannot be broadcast (axis {axis} from the right: {lhs_size} vs {rhs_size}; sizes must be equal or one of them 1)"
    )]
    NotBroadcastable {
        /// The op that broadcast.
        context: String,
        /// Shape of the left operand.
        lhs: Vec<usize>,
        /// Shape of the right operand.
        rhs: Vec<usize>,
        /// The first disagreeing axis, counted from the right (0 = last).
        axis: usize,
        /// Size of that axis in `lhs`.
        lhs_size: usize,
        /// Size of that axis in `rhs`.
        rhs_size: usize,
    },
    /// An axis argument does not exist in the tensor.
    #[error(
        "{context}: axis {axis} is out of range for a rank-{rank} tensor (valid: -{rank}..{rank})"
    )]
    AxisOutOfRange {
        /// The op that got the axis.
        context: String,
        /// The axis as given; negative values count from the end.
        axis: isize,
        /// Number of axes of the tensor.
        rank: usize,
    },
    /// Inner dimensions of a matrix product disagree.
    #[error(
        "matmul: inner dimensions differ: lhs {lhs:?} has {lhs_inner} columns but rhs {rhs:?} has {rhs_inner} rows"
    )]
    MatmulInner {
        /// Shape of the left operand.
        lhs: Vec<usize>,
        /// Shape of the right operand.
        rhs: Vec<usize>,
        /// Columns of the left operand (its last axis).
        lhs_inner: usize,
        /// Rows of the right operand (its second-to-last axis).
        rhs_inner: usize,
    },
    /// Any other invalid shape argument, with an explanation.
    #[error("{context}: {message}")]
    Invalid {
        /// What was being checked.
        context: String,
        /// What is wrong with the shape.
        message: String,
    },
}

/// A fault in gradient computation that user code can cause.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AutogradError {
    /// `backward()` was called on a tensor with more than one element.
    #[error(
        "backward: the output has shape {shape:?}, not a single element; pass a seed gradient of that shape with `backward_with(seed)` or reduce it first (e.g. `.sum_all()`)"
    )]
    NonScalarWithoutSeed {
        /// Shape of the output.
        shape: Vec<usize>,
    },
    /// A tensor saved for backward was modified in place after it was recorded.
    #[error(
        "backward of {op}: a tensor saved for the gradient was modified in place after it was recorded (version {saved} when saved, {current} now); compute the loss again after the in-place change, or clone the tensor before mutating it"
    )]
    VersionMismatch {
        /// The op whose backward read the tensor.
        op: &'static str,
        /// Storage version when the tensor was saved.
        saved: u64,
        /// Storage version at backward time.
        current: u64,
    },
    /// The gradient asked for was never produced.
    #[error("no gradient for tensor #{id} {shape:?}: {reason}")]
    MissingGradient {
        /// Id of the tensor on the graph; 0 when it does not require a gradient.
        id: u64,
        /// Shape of the tensor.
        shape: Vec<usize>,
        /// Why there is no gradient, and what to do about it.
        reason: String,
    },
    /// The output of `backward`/`grad` does not depend on anything that requires a gradient.
    #[error(
        "{context}: the output is not connected to the graph (no input requires a gradient, or it was computed under `no_grad`)"
    )]
    NotTracked {
        /// The call that needed a graph.
        context: String,
    },
    /// An in-place update on a tensor the tape is tracking, while recording.
    #[error(
        "{op}: in-place update of a tensor that requires a gradient while gradients are recorded; wrap the update in `let _guard = rumus::no_grad();` (as optimizers do)"
    )]
    InPlaceOnTracked {
        /// The in-place op.
        op: &'static str,
    },
    /// `create_graph` through an op whose backward is a kernel rather than recorded ops.
    #[error(
        "backward of {op}: this custom op's backward is a kernel, not recorded ops, so its gradient cannot be differentiated again; compute higher-order gradients of a graph without it (or write the op with built-in ops)"
    )]
    NoDoubleBackward {
        /// The custom op.
        op: &'static str,
    },
    /// Under [`crate::detect_anomaly`]: the first op whose output (forward) or whose
    /// inputs' gradients (backward) hold NaN or infinity while what it read was finite.
    #[error("anomaly: {message}")]
    Anomaly {
        /// Which op, where, on what shapes, and what it produced.
        message: String,
    },
    /// `create_graph` through a segment wrapped in [`crate::autograd::checkpoint`].
    #[error(
        "backward of checkpoint: a recorded backward pass (`create_graph`) cannot go through a checkpointed segment; call the segment without `checkpoint` where higher-order gradients are needed"
    )]
    CheckpointDoubleBackward,
    /// Gradients are only defined for floating-point tensors.
    #[error(
        "{context}: gradients need an f32 or f64 tensor, this one is {dtype}{}",
        half_hint(*dtype)
    )]
    NotDifferentiable {
        /// Where a gradient was asked for.
        context: String,
        /// The tensor's dtype.
        dtype: DType,
    },
}

/// Faults of devices: no GPU, tensors on different devices, ops a GPU cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DeviceError {
    /// No GPU adapter could be opened.
    #[error(
        "no GPU adapter was found ({reason}); install a Vulkan, Metal or DX12 driver (on Debian without a GPU: `apt-get install mesa-vulkan-drivers` for the lavapipe CPU device), or stay on Device::Cpu"
    )]
    NoAdapter {
        /// What the graphics API reported.
        reason: String,
    },
    /// A GPU was asked for, but the crate was built without its `gpu` feature.
    #[error(
        "rumus was built without its `gpu` feature; enable it (`rumus = {{ features = [\"gpu\"] }}`) to use Device::gpu()"
    )]
    NotCompiled,
    /// The GPU driver or `wgpu` rejected a request (out of memory, a lost device, a
    /// validation error).
    #[error("the GPU refused the request: {message}")]
    Gpu {
        /// The message from `wgpu`.
        message: String,
    },
    /// No CUDA device could be opened: no NVIDIA driver, a CUDA library missing, or no
    /// device of that ordinal.
    #[error(
        "no CUDA device could be opened ({reason}); rumus needs the NVIDIA driver (libcuda.so) and the CUDA 13 libraries libnvrtc.so.13 and libcublasLt.so.13 where the dynamic loader finds them (a CUDA 13 toolkit's lib64, or the `nvidia-*` wheels of a PyTorch install, on LD_LIBRARY_PATH), or stay on Device::Cpu / Device::gpu()"
    )]
    NoCuda {
        /// What was missing or what the driver reported.
        reason: String,
    },
    /// A CUDA device was asked for, but the crate was built without its `cuda` feature.
    #[error(
        "rumus was built without its `cuda` feature; enable it (`rumus = {{ features = [\"cuda\"] }}`) to use Device::cuda()"
    )]
    CudaNotCompiled,
    /// The CUDA driver, NVRTC or cuBLASLt refused a request (out of memory, a kernel that
    /// failed, a lost device).
    #[error("the CUDA device refused the request: {message}")]
    Cuda {
        /// What failed and the library's error.
        message: String,
    },
    /// A device name that names no device.
    #[error("unknown device `{name}`; use cpu, gpu (wgpu's default adapter), cuda or cuda:N")]
    UnknownDevice {
        /// The name given.
        name: String,
    },
    /// The operands of one op are on different devices.
    #[error(
        "{op}: operands are on different devices ({lhs} and {rhs}); move one with `.to(&device)` first"
    )]
    Mismatch {
        /// The op.
        op: &'static str,
        /// Device of the first operand.
        lhs: String,
        /// Device of the second operand.
        rhs: String,
    },
    /// A custom op without WGSL kernels got GPU tensors.
    #[error(
        "{op}: this custom op has no GPU kernels; give it WGSL ones (`CustomOp::wgsl`), or move its inputs to the CPU with `.to(&Device::Cpu)`"
    )]
    NoGpuKernel {
        /// The custom op.
        op: &'static str,
    },
    /// A backend has no kernel for an op.
    #[error(
        "{op} is not supported on the {backend} backend; move its operands to a device that runs it with `.to(&device)` first"
    )]
    Unsupported {
        /// The op.
        op: &'static str,
        /// The backend's name.
        backend: &'static str,
    },
    /// A GPU op got a tensor of a dtype the GPU kernels do not handle.
    #[error(
        "{op}: {dtype} tensors are not supported on the GPU; convert with `.to_dtype(DType::F32)` first"
    )]
    UnsupportedDType {
        /// The op.
        op: &'static str,
        /// The tensor's dtype.
        dtype: DType,
    },
    /// A tensor is larger than the adapter's largest storage buffer.
    #[error(
        "{op}: the tensor needs {bytes} bytes in one GPU buffer but this adapter allows at most {limit}; split the work into smaller tensors"
    )]
    TooLarge {
        /// The op that needed the buffer.
        op: &'static str,
        /// Size of the buffer, in bytes.
        bytes: u64,
        /// The adapter's limit, in bytes.
        limit: u64,
    },
    /// A tensor has more axes than the GPU kernels accept.
    #[error("{op}: a tensor of rank {rank} is beyond the GPU kernels' limit of {limit} axes")]
    RankTooLarge {
        /// The op.
        op: &'static str,
        /// Number of axes of the tensor.
        rank: usize,
        /// Most axes the kernels accept.
        limit: usize,
    },
    /// A CPU kernel was handed GPU memory to write; a bug in rumus, not in user code.
    #[error("internal: a CPU kernel tried to write GPU memory; please report this")]
    HostWriteToGpu,
    /// Waiting for the GPU went past the device's limit without any queued work finishing.
    #[error(
        "the GPU finished none of its queued work within {timeout:?} while rumus waited for {waiting_for}: a kernel may never end (a loop in a custom op's WGSL, a driver fault) and still occupies the GPU; run with RUMUS_GPU_TRACE=1 to name it, or allow longer with GpuDevice::set_wait_timeout or RUMUS_GPU_WAIT_TIMEOUT (seconds, 0 waits forever)"
    )]
    Timeout {
        /// What was waited for ("a readback").
        waiting_for: String,
        /// The limit that passed.
        timeout: std::time::Duration,
    },
    /// A kernel invocation would loop longer than the device runs loops before it ends them
    /// silently (lavapipe).
    #[error(
        "{op}: one GPU kernel invocation would run {iterations} loop iterations, past the {budget} this device ({device}) runs before it silently ends its loops; run this op on Device::Cpu or a hardware GPU"
    )]
    LoopBudget {
        /// The op.
        op: &'static str,
        /// Iterations the invocation would need.
        iterations: usize,
        /// Iterations the device runs.
        budget: usize,
        /// The adapter's name.
        device: String,
    },
    /// The GPU reported a fault after the call that caused it: a lost device, or an error of
    /// work already queued. The device stays unusable.
    #[error(
        "the GPU reported a fault and cannot be used any more in this process: {message}; tensors already copied to the CPU are intact: save what you need and restart (on a lost device, check the driver's log)"
    )]
    Fault {
        /// What wgpu reported.
        message: String,
    },
    /// An environment variable that configures devices holds a value it cannot take.
    #[error("{variable}={value:?} is not valid: expected {expected}")]
    Setting {
        /// The variable.
        variable: &'static str,
        /// What it holds.
        value: String,
        /// What it takes.
        expected: &'static str,
    },
}

/// Every error rumus returns.
///
/// `Debug` prints the same readable message as `Display`, because that is what a `main`
/// returning `rumus::Result<()>` shows the user (`Error: fc1 ... expected 784`, not
/// `Error: Shape(AxisMismatch { .. })`). The structured form stays reachable: match on the
/// variants, or format with `{:#?}`.
#[derive(Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A shape disagreement.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// A fault in gradient computation.
    #[error(transparent)]
    Autograd(#[from] AutogradError),
    /// A device fault.
    #[error(transparent)]
    Device(#[from] DeviceError),
    /// An operation got a tensor of a dtype it does not support.
    #[error("{op}: expected {expected}, got a {found} tensor{}", half_hint(*found))]
    DType {
        /// The op.
        op: &'static str,
        /// The dtypes it accepts, in words.
        expected: &'static str,
        /// The dtype it got.
        found: DType,
    },
    /// Two operands of one op have different dtypes (rumus never promotes silently).
    #[error(
        "{op}: operands have different dtypes ({lhs} and {rhs}); convert one with `.to_dtype()`"
    )]
    DTypeMismatch {
        /// The op.
        op: &'static str,
        /// Dtype of the first operand.
        lhs: DType,
        /// Dtype of the second operand.
        rhs: DType,
    },
    /// An index tensor points outside the axis it indexes.
    #[error("{op}: index {index} is out of range for axis {axis} of size {size}")]
    IndexOutOfRange {
        /// The op.
        op: &'static str,
        /// The offending index.
        index: i64,
        /// The indexed axis.
        axis: usize,
        /// Size of that axis.
        size: usize,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {message}")]
    Io {
        /// The file or directory.
        path: String,
        /// What failed and why.
        message: String,
    },
    /// A file's contents are not what its format promises (truncated, corrupt, unsupported).
    #[error("{path}: {message}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong with its contents.
        message: String,
    },
    /// An invalid scalar argument (a negative size, an empty range, ...).
    #[error("{op}: {message}")]
    InvalidArgument {
        /// The op or function.
        op: &'static str,
        /// Which argument is wrong and why.
        message: String,
    },
    /// A result or buffer whose size came from the input cannot be allocated.
    #[error(
        "{op}: {message}; check the sizes that led here (a shape read from a file, a padding, a range), or work in smaller pieces"
    )]
    OutOfMemory {
        /// The op that asked for the memory.
        op: String,
        /// How much was asked for, and why it could not be had.
        message: String,
    },
    /// A collective operation across processes failed or timed out (a rank died, the
    /// launcher is missing, ranks disagree about sizes).
    #[error("{op}: {message}")]
    Distributed {
        /// The collective or setup step.
        op: &'static str,
        /// What went wrong.
        message: String,
    },
}

impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !f.alternate() {
            return std::fmt::Display::fmt(self, f);
        }
        match self {
            Error::Shape(e) => f.debug_tuple("Shape").field(e).finish(),
            Error::Autograd(e) => f.debug_tuple("Autograd").field(e).finish(),
            Error::Device(e) => f.debug_tuple("Device").field(e).finish(),
            Error::DType {
                op,
                expected,
                found,
            } => f
                .debug_struct("DType")
                .field("op", op)
                .field("expected", expected)
                .field("found", found)
                .finish(),
            Error::DTypeMismatch { op, lhs, rhs } => f
                .debug_struct("DTypeMismatch")
                .field("op", op)
                .field("lhs", lhs)
                .field("rhs", rhs)
                .finish(),
            Error::IndexOutOfRange {
                op,
                index,
                axis,
                size,
            } => f
                .debug_struct("IndexOutOfRange")
                .field("op", op)
                .field("index", index)
                .field("axis", axis)
                .field("size", size)
                .finish(),
            Error::Io { path, message } => named_message(f, "Io", "path", path, message),
            Error::Format { path, message } => named_message(f, "Format", "path", path, message),
            Error::InvalidArgument { op, message } => {
                named_message(f, "InvalidArgument", "op", op, message)
            }
            Error::OutOfMemory { op, message } => {
                named_message(f, "OutOfMemory", "op", op, message)
            }
            Error::Distributed { op, message } => {
                named_message(f, "Distributed", "op", op, message)
            }
        }
    }
}

/// The structured form of a variant holding a place (a path or an op) and a message.
fn named_message(
    f: &mut std::fmt::Formatter<'_>,
    variant: &str,
    place: &str,
    value: &str,
    message: &str,
) -> std::fmt::Result {
    f.debug_struct(variant)
        .field(place, &value)
        .field("message", &message)
        .finish()
}

/// What to do with an `f16` or `bf16` tensor that reached an op it cannot enter.
fn half_hint(dtype: DType) -> &'static str {
    match dtype {
        DType::F16 => {
            " (f16 is a storage dtype: it converts, moves, copies and multiplies matrices; \
             convert with `.to_dtype(DType::F32)` for other math and for gradients)"
        }
        DType::BF16 => {
            " (bf16 is a storage dtype: it converts, moves, copies and multiplies matrices; \
             convert with `.to_dtype(DType::F32)` for other math and for gradients)"
        }
        _ => "",
    }
}

/// The message a panic was raised with (`panic!`'s text), for the error that replaces it.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)")
}
