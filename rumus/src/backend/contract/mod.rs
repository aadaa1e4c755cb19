//! The backend contract: what a compute backend provides.
//!
//! Every kernel takes its operands as [`Src`]s (the backend's memory plus the view the
//! kernel reads, already broadcast to the output where the op broadcasts) and returns fresh
//! contiguous memory of the result. Shapes, dtypes and broadcasting are checked by the op
//! before it gets here; a kernel checks only what its backend cannot do (a dtype it has no
//! kernel for, a size past a device limit).
//!
//! The kernels are grouped by family, one trait and one file each (`contract/elementwise.rs`,
//! ...); [`Kernels`] is all of them together.
//!
//! Each method has a default body that refuses with [`DeviceError::Unsupported`], naming the
//! op and the backend: a new backend can start with a few kernels and grow, and an op it
//! lacks is a clear error, never a silent copy to the host.

mod allocate;
mod attention;
mod custom;
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

pub use allocate::Allocate;
#[cfg(any(feature = "gpu", feature = "cuda"))]
pub(crate) use attention::result_layout;
pub use attention::{Attention, Forward, Viewed};
pub use custom::Custom;
pub use elementwise::Pointwise;
pub use index::{Index, check_index_dtype};
pub use int8::Int8;
pub use join::Join;
pub use loss::Loss;
pub use matmul::Matmul;
pub use norm::Norm;
pub use optim::Optim;
pub use reduce::Reduce;
pub use sparse::{CsrPattern, Sparse, split_rows};
pub use update::Update;
pub use window::Windows;

use crate::dtype::DType;
use crate::error::{DeviceError, Error};
use crate::shape::Layout;

/// Memory of one backend: host vectors, a GPU buffer.
pub trait BackendMemory {
    /// The dtype of the elements.
    fn dtype(&self) -> DType;
    /// Number of elements (not bytes).
    fn len(&self) -> usize;
    /// Whether the memory holds no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One operand of a kernel: a backend's memory and the strided view of it to read.
pub struct Src<'a, M> {
    /// The elements.
    pub memory: &'a M,
    /// Dims, strides (0 along broadcast axes) and offset, in elements.
    pub layout: &'a Layout,
}

impl<M> Clone for Src<'_, M> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<M> Copy for Src<'_, M> {}

impl<'a, M: BackendMemory> Src<'a, M> {
    /// `memory` read through `layout`.
    #[inline]
    pub fn new(memory: &'a M, layout: &'a Layout) -> Self {
        Src { memory, layout }
    }

    /// The dims of the view.
    #[inline]
    pub fn dims(&self) -> &'a [usize] {
        self.layout.dims()
    }

    /// The dtype of the elements.
    #[inline]
    pub fn dtype(&self) -> DType {
        self.memory.dtype()
    }

    /// Number of elements of the view.
    #[inline]
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }
}

/// An operand a kernel writes in place: a backend's memory, held exclusively, and the view
/// of it to write.
pub struct Dst<'a, M> {
    /// The elements.
    pub memory: &'a mut M,
    /// Dims, strides and offset, in elements.
    pub layout: &'a Layout,
}

/// A compute backend: its memory type and its name. The kernels come in one trait per family
/// of ops (the submodules of this one: [`Pointwise`], ...), each a supertrait of
/// [`Kernels`], which is what storage dispatches to. Implemented by the CPU
/// ([`Cpu`](crate::backend::cpu::Cpu)) and by a wgpu device
/// ([`GpuDevice`](crate::backend::gpu::GpuDevice)).
pub trait Backend {
    /// The memory this backend's kernels read and write.
    type Memory: BackendMemory;

    /// The backend's name in error messages (`"cpu"`, `"wgpu"`).
    fn name(&self) -> &'static str;

    /// The error for an op this backend has no kernel for.
    fn unsupported(&self, op: &'static str) -> Error {
        DeviceError::Unsupported {
            op,
            backend: self.name(),
        }
        .into()
    }
}

/// Declares [`Kernels`] as every family listed, and implements it for whatever implements
/// them all (one list to extend when a family is added).
macro_rules! kernels {
    ($($family:ident),+ $(,)?) => {
        /// Every kernel family: what storage's dispatch calls. Implemented for every type
        /// that implements all the families.
        pub trait Kernels: $($family +)+ {}

        impl<B: $($family +)+> Kernels for B {}
    };
}

kernels!(
    Allocate, Attention, Custom, Index, Int8, Join, Loss, Matmul, Norm, Optim, Pointwise, Reduce,
    Sparse, Update, Windows,
);

/// Implements every family but `Int8` with its defaults for `$device`: the stub of a backend
/// built without its cargo feature, whose kernels no dispatch can reach (no memory of it
/// exists).
#[cfg_attr(all(feature = "gpu", feature = "cuda"), allow(unused_macros))]
macro_rules! refuse_every_kernel {
    ($device:ty) => {
        impl $crate::backend::Allocate for $device {}
        impl $crate::backend::Attention for $device {}
        impl $crate::backend::Custom for $device {}
        impl $crate::backend::Index for $device {}
        impl $crate::backend::Join for $device {}
        impl $crate::backend::Loss for $device {}
        impl $crate::backend::Matmul for $device {}
        impl $crate::backend::Norm for $device {}
        impl $crate::backend::Optim for $device {}
        impl $crate::backend::Pointwise for $device {}
        impl $crate::backend::Reduce for $device {}
        impl $crate::backend::Sparse for $device {}
        impl $crate::backend::Update for $device {}
        impl $crate::backend::Windows for $device {}
    };
}
#[cfg(not(all(feature = "gpu", feature = "cuda")))]
pub(crate) use refuse_every_kernel;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::kinds::UnaryOp;

    /// A backend with memory and no kernels at all: what a new backend starts as.
    struct Empty;

    struct Nothing;

    impl BackendMemory for Nothing {
        fn dtype(&self) -> DType {
            DType::F32
        }

        fn len(&self) -> usize {
            0
        }
    }

    impl Backend for Empty {
        type Memory = Nothing;

        fn name(&self) -> &'static str {
            "empty"
        }
    }

    impl Pointwise for Empty {}

    #[test]
    fn a_kernel_a_backend_lacks_is_an_error_naming_the_op_and_the_backend() {
        let layout = Layout::contiguous(&[0]);
        let refused = Empty
            .unary(Src::new(&Nothing, &layout), UnaryOp::Relu)
            .err()
            .expect("no kernel, no result");
        assert_eq!(
            refused.to_string(),
            "relu is not supported on the empty backend; move its operands to a device that runs it with `.to(&device)` first"
        );
        // Optional fused kernels answer "none" instead, and the op composes the result.
        let fused = Empty.activation_grad(
            Src::new(&Nothing, &layout),
            Src::new(&Nothing, &layout),
            UnaryOp::Relu,
            None,
        );
        assert!(matches!(fused, Ok(None)));
    }
}
