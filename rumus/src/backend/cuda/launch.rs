//! Launching a CUDA C kernel: operand views as the kernels read them (`View` in
//! `shaders/cuda/common.cuh`), kernel names per dtype, and the launch itself.

use std::ffi::c_void;

use cudarc::driver::{result, sys};

use super::compile::Kernel;
use super::context::{CudaDevice, cuda_error};
use crate::backend::strided::{MAX_RANK, Strided};
use crate::dtype::DType;
use crate::error::{DeviceError, Result};
use crate::shape::Layout;

/// One operand's strided view, laid out as `struct View` of common.cuh.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct View {
    rank: i32,
    /// Whether the walk has fewer than 2^31 elements (32-bit index arithmetic).
    narrow: i32,
    offset: i64,
    dims: [i64; MAX_RANK],
    strides: [i64; MAX_RANK],
}

impl View {
    /// The stride of the view's last axis (1 when neighbouring elements of the walk are
    /// neighbours in memory).
    pub(crate) fn innermost_stride(&self) -> i64 {
        self.strides[self.rank as usize - 1]
    }
}

/// The views of several operands walked together over `dims` (the output's), their axes
/// merged where every operand allows it.
pub(crate) fn views<const N: usize>(
    op: &'static str,
    dims: &[usize],
    layouts: [&Layout; N],
) -> Result<[View; N]> {
    let strided = Strided::new(op, dims, &layouts)?;
    Ok(std::array::from_fn(|k| {
        let mut view = View {
            rank: strided.dims.len().max(1) as i32,
            narrow: i32::from(strided.dims.iter().product::<usize>() < 1 << 31),
            offset: strided.offsets[k] as i64,
            dims: [1; MAX_RANK],
            strides: [0; MAX_RANK],
        };
        for (axis, (&size, &stride)) in strided.dims.iter().zip(&strided.strides[k]).enumerate() {
            view.dims[axis] = size as i64;
            view.strides[axis] = stride as i64;
        }
        view
    }))
}

/// Refuses a dtype that is not a float (`f32`, `f64`, `f16`, `bf16`: what the float kernels
/// are instantiated for).
pub(crate) fn check_floating(op: &'static str, dtype: DType) -> Result<()> {
    if matches!(dtype, DType::F32 | DType::F64 | DType::F16 | DType::BF16) {
        Ok(())
    } else {
        Err(DeviceError::UnsupportedDType { op, dtype }.into())
    }
}

/// The suffix of a kernel's entry point for elements of `dtype` (`unary_f32`).
pub(crate) fn dtype_suffix(dtype: DType) -> &'static str {
    match dtype {
        DType::F32 => "f32",
        DType::F64 => "f64",
        DType::F16 => "f16",
        DType::BF16 => "bf16",
        DType::I64 => "i64",
        DType::Bool => "bool",
    }
}

/// The suffix of a kernel that only moves elements of `dtype`'s width (`copy_b4`).
pub(crate) fn width_suffix(dtype: DType) -> &'static str {
    match dtype.size_in_bytes() {
        1 => "b1",
        2 => "b2",
        4 => "b4",
        _ => "b8",
    }
}

/// A value a kernel takes as an argument, passed by address as `cuLaunchKernel` wants.
pub(crate) trait Arg {
    /// The address of the value.
    fn address(&self) -> *mut c_void;
}

/// Implements [`Arg`] for plain values (`#[repr(C)]` structs of the layout the kernel
/// declares, numbers).
macro_rules! plain_arg {
    ($($t:ty),*) => {$(
        impl $crate::backend::cuda::launch::Arg for $t {
            fn address(&self) -> *mut std::ffi::c_void {
                std::ptr::from_ref(self).cast_mut().cast()
            }
        }
    )*};
}
pub(super) use plain_arg;
plain_arg!(i32, u32, i64, u64, f32, f64, u8, u16, View);

/// Threads per block of the element-wise kernels.
const BLOCK: u32 = 256;

/// Blocks for a grid-stride loop over `n` elements: one thread per element up to a cap, past
/// which threads take several (the loop in every kernel).
pub(crate) fn blocks_for(n: usize) -> u32 {
    n.div_ceil(BLOCK as usize).clamp(1, 65_535) as u32
}

impl CudaDevice {
    /// Queues `kernel` over `n` elements in a grid-stride loop, with `args` in its order.
    pub(crate) fn launch_elements(&self, kernel: Kernel, n: usize, args: &[&dyn Arg]) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        self.launch(kernel, (blocks_for(n), 1, 1), (BLOCK, 1, 1), 0, args)
    }

    /// Queues `kernel` on the device's stream with this grid, block and dynamic shared memory.
    pub(crate) fn launch(
        &self,
        kernel: Kernel,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        shared_bytes: u32,
        args: &[&dyn Arg],
    ) -> Result<()> {
        let mut params: smallvec::SmallVec<[*mut c_void; 16]> =
            args.iter().map(|arg| arg.address()).collect();
        self.bind()?;
        self.timed(|| kernel.name(), || self.launch_now(kernel, (grid, block), shared_bytes, &mut params))
    }

    fn launch_now(
        &self,
        kernel: Kernel,
        (grid, block): ((u32, u32, u32), (u32, u32, u32)),
        shared_bytes: u32,
        params: &mut [*mut c_void],
    ) -> Result<()> {
        // SAFETY: every argument is a value of the type the kernel declares at that position
        // (the callers mirror the CUDA signatures), alive until this call returns, which is
        // when the driver has copied them; the buffers they address are held by the caller's
        // storages, and any free of them is queued after this kernel on the same stream.
        unsafe {
            result::launch_kernel(
                kernel.function,
                grid,
                block,
                shared_bytes,
                self.raw_stream() as sys::CUstream,
                params,
            )
        }
        .map_err(|e| cuda_error("launching a kernel", e))
    }
}
