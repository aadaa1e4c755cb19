//! The untyped core tensor. [`DynTensor`] knows its shape only at run time; it owns every
//! kernel call and every backward formula, so kernels are compiled once and not per shape.
//! The typed façade [`Tensor<S>`](crate::Tensor) wraps it at zero cost.

mod constructors;
mod debug;
pub(crate) mod typed;

pub use typed::Tensor;

use std::mem::MaybeUninit;
use std::ptr::addr_of_mut;

use triomphe::Arc;

use crate::autograd::{GradMeta, Node, TensorId};
use crate::dtype::DType;
use crate::element::Element;
use crate::error::{AutogradError, Error, Result};
use crate::shape::Layout;
use crate::storage::{CpuBuffer, Operand, Storage};

/// A tensor whose shape is known at run time: dims, strides and offset over shared storage,
/// plus its place on the autograd graph when it requires a gradient.
///
/// Cloning is cheap (one `Arc`); clones are the same tensor for autograd purposes.
///
/// Every op returns [`Result`]: shapes, dtypes and devices are checked when the op runs.
///
/// ```
/// use rumus::DynTensor;
///
/// # fn main() -> rumus::Result<()> {
/// // rows [1, 2, 3] and [4, 5, 6], times rows [1, 0], [0, 1] and [1, 1]
/// let a = DynTensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3])?;
/// let b = DynTensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0, 1.0, 1.0], &[3, 2])?;
/// let c = a.matmul(&b)?;
/// assert_eq!(c.dims(), &[2, 2]);
/// assert_eq!(c.to_vec::<f32>()?, vec![1.0 + 3.0, 2.0 + 3.0, 4.0 + 6.0, 5.0 + 6.0]);
/// // [2, 3] @ [2, 3]: an Err that names both shapes, not a panic
/// assert!(a.matmul(&a).is_err());
///
/// // d/dx sum(x * x) = 2x
/// let x = DynTensor::from_vec(vec![1.0f32, -2.0, 3.0], &[3])?.requires_grad_()?;
/// let grads = x.mul(&x)?.sum_all()?.backward()?;
/// assert_eq!(grads.grad(&x)?.to_vec::<f32>()?, vec![2.0, -4.0, 6.0]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct DynTensor(Arc<TensorImpl>);

struct TensorImpl {
    storage: Arc<Storage>,
    layout: Layout,
    /// `None` for tensors that need no gradient: they carry no graph metadata at all.
    grad: Option<GradMeta>,
}

impl DynTensor {
    #[inline]
    pub(crate) fn from_storage(storage: Arc<Storage>, layout: Layout) -> Self {
        Self::in_place(storage, |place| {
            place.write(layout);
        })
    }

    /// A tensor over `storage` whose layout `init_layout` writes: the handle is built where
    /// it lives. Every op's result comes through here, and building the struct on the stack
    /// to move it into the heap cost a `memcpy` and a store-forwarding stall per op.
    #[inline]
    fn in_place(storage: Arc<Storage>, init_layout: impl FnOnce(&mut MaybeUninit<Layout>)) -> Self {
        let mut fresh = Arc::<MaybeUninit<TensorImpl>>::new_uninit();
        let place = fresh.as_mut_ptr().cast::<TensorImpl>();
        // SAFETY: `place` is the fresh allocation's uninitialised `TensorImpl`, reachable
        // only from here; `init_layout` writes the layout (it gets it as `MaybeUninit`, whose
        // `write` is the only way to fill it), and every other field is written before
        // `assume_init`. The layout goes first: should it panic, `storage` is still ours
        // and drops.
        unsafe {
            init_layout(&mut *addr_of_mut!((*place).layout).cast::<MaybeUninit<Layout>>());
            addr_of_mut!((*place).storage).write(storage);
            addr_of_mut!((*place).grad).write(None);
            DynTensor(fresh.assume_init())
        }
    }

    /// A fresh contiguous tensor over `buffer` (whose length the caller matched to `dims`).
    #[inline]
    pub(crate) fn from_buffer(buffer: CpuBuffer, dims: &[usize]) -> Self {
        Self::computed(Storage::new(buffer), dims)
    }

    /// A fresh contiguous tensor over `storage`, a kernel's result of exactly `dims` elements.
    #[inline]
    pub(crate) fn computed(storage: Arc<Storage>, dims: &[usize]) -> Self {
        // (A zero among the dims makes an empty tensor however the others multiply.)
        debug_assert_eq!(
            Ok(storage.len()),
            crate::shape::checked_numel(dims, "a result").map_err(|_| ())
        );
        Self::in_place(storage, |place| Layout::write_contiguous(place, dims))
    }

    /// This tensor as a kernel operand, read through its own layout.
    #[inline]
    pub(crate) fn operand(&self) -> Operand<'_> {
        self.operand_as(&self.0.layout)
    }

    /// This tensor as a kernel operand read through `layout` (a broadcast of its own).
    #[inline]
    pub(crate) fn operand_as<'a>(&'a self, layout: &'a Layout) -> Operand<'a> {
        Operand {
            storage: &self.0.storage,
            layout,
            scalar: self.0.layout.rank() == 0,
        }
    }

    /// Another view of the same storage, not attached to the graph.
    pub(crate) fn view_with(&self, layout: Layout) -> Self {
        Self::from_storage(self.0.storage.clone(), layout)
    }

    /// This tensor with `meta` attached. An op's fresh output is its handle's only owner,
    /// so the metadata is set in place; a shared handle gets a new one over the same storage.
    pub(crate) fn with_grad_meta(mut self, meta: GradMeta) -> Self {
        if let Some(unique) = Arc::get_mut(&mut self.0) {
            unique.grad = Some(meta);
            return self;
        }
        DynTensor(Arc::new(TensorImpl {
            storage: self.0.storage.clone(),
            layout: self.0.layout.clone(),
            grad: Some(meta),
        }))
    }

    /// The graph node this tensor owns, when this handle was its last owner.
    pub(crate) fn into_graph_node(self) -> Option<Arc<Node>> {
        Arc::try_unwrap(self.0).ok()?.grad?.node
    }

    /// The graph node this tensor owns, moved out when this handle is its last owner (the
    /// tensor stays, off the graph): for records that drop their saved tensors in place.
    pub(crate) fn take_graph_node(&mut self) -> Option<Arc<Node>> {
        Arc::get_mut(&mut self.0)?.grad.as_mut()?.node.take()
    }

    /// This tensor's identity while it lives: shared by its clones, not by views or copies.
    #[cfg_attr(not(feature = "onnx"), allow(dead_code))]
    pub(crate) fn identity(&self) -> usize {
        Arc::as_ptr(&self.0).addr()
    }

    /// The name of the op that produced this tensor on the autograd tape, if one did.
    #[cfg_attr(not(feature = "onnx"), allow(dead_code))]
    pub(crate) fn grad_fn_name(&self) -> Option<&'static str> {
        Some(self.0.grad.as_ref()?.node.as_ref()?.op.name())
    }

    /// The storage, when this is its only tensor (a freshly computed result).
    pub(crate) fn into_storage(self) -> Option<Storage> {
        Arc::try_unwrap(Arc::try_unwrap(self.0).ok()?.storage).ok()
    }

    pub(crate) fn grad_meta(&self) -> Option<&GradMeta> {
        self.0.grad.as_ref()
    }

    pub(crate) fn storage(&self) -> &Arc<Storage> {
        &self.0.storage
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.0.layout
    }

    /// Runs `f` on the raw buffer and this tensor's layout under a read lock. A GPU tensor
    /// reaching a CPU kernel is read back first (a counted fallback transfer, an error if
    /// the GPU fails).
    pub(crate) fn with_buffer<R>(&self, f: impl FnOnce(&CpuBuffer, &Layout) -> R) -> Result<R> {
        let view = self.0.storage.read()?;
        Ok(f(&view, &self.0.layout))
    }

    /// Runs `f` on the elements in host memory: in place for a CPU tensor, a copy read back
    /// (because the caller asked for the data) for a GPU tensor.
    fn with_host_elements<R>(&self, f: impl FnOnce(&CpuBuffer, &Layout) -> R) -> Result<R> {
        if !self.device().is_gpu() {
            return self.with_buffer(f);
        }
        if let Some(host) = self.0.storage.uploaded_elements() {
            return Ok(f(host, &self.0.layout));
        }
        // Only this view's elements come back, not the whole storage.
        let contiguous = self.contiguous_untracked()?;
        let range = contiguous
            .contiguous_range()
            .expect("contiguous_untracked is contiguous");
        let host = contiguous.0.storage.host_range(range)?;
        let layout = Layout::contiguous(self.dims());
        Ok(f(&host, &layout))
    }

    /// The elements in row-major order in host memory (read back from a GPU when needed).
    pub(crate) fn host_copy(&self) -> Result<CpuBuffer> {
        self.with_host_elements(|buffer, layout| {
            crate::storage::map_buffer!(buffer, |v| crate::backend::cpu::strided::map(
                v,
                layout,
                |x| x
            ))
        })
    }

    /// The device holding this tensor's elements.
    pub fn device(&self) -> crate::Device {
        self.0.storage.device()
    }

    /// Sizes of every axis.
    pub fn dims(&self) -> &[usize] {
        self.0.layout.dims()
    }

    /// Number of axes.
    pub fn rank(&self) -> usize {
        self.0.layout.rank()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.0.layout.numel()
    }

    /// Element type of the storage.
    pub fn dtype(&self) -> DType {
        self.0.storage.dtype()
    }

    /// Whether the elements are row-major without gaps.
    pub fn is_contiguous(&self) -> bool {
        self.0.layout.is_contiguous()
    }

    /// Size of one axis (negative counts from the end).
    pub fn dim(&self, axis: isize) -> Result<usize> {
        Ok(self.dims()[crate::shape::normalize_axis(axis, self.rank(), "dim")?])
    }

    /// The identity autograd uses for this tensor, if it is on the graph.
    pub fn id(&self) -> Option<TensorId> {
        self.0.grad.as_ref().map(|meta| meta.id)
    }

    /// Whether gradients flow to or through this tensor.
    pub fn requires_grad(&self) -> bool {
        self.0.grad.is_some()
    }

    /// True unless this tensor was produced by a recorded op.
    pub fn is_leaf(&self) -> bool {
        self.0.grad.as_ref().is_none_or(|meta| meta.node.is_none())
    }

    /// Marks this tensor as a leaf that gradients are computed for (a parameter). The result
    /// shares storage with `self` but has a fresh identity.
    pub fn requires_grad_(self) -> Result<Self> {
        if !self.dtype().is_float() {
            return Err(AutogradError::NotDifferentiable {
                context: "requires_grad_".into(),
                dtype: self.dtype(),
            }
            .into());
        }
        Ok(self.detach().with_grad_meta(GradMeta::leaf()))
    }

    /// The same data, cut from the graph.
    pub fn detach(&self) -> Self {
        self.view_with(self.0.layout.clone())
    }

    /// How many in-place writes the underlying storage has seen.
    pub fn version(&self) -> u64 {
        self.0.storage.version()
    }

    /// The storage range of this tensor's elements, when they are contiguous.
    pub(crate) fn contiguous_range(&self) -> Option<std::ops::Range<usize>> {
        let layout = self.layout();
        layout
            .is_contiguous()
            .then(|| layout.offset()..layout.offset() + layout.numel())
    }

    /// Whether two tensors are views of the same memory.
    pub fn shares_storage_with(&self, other: &DynTensor) -> bool {
        Arc::ptr_eq(&self.0.storage, &other.0.storage)
    }

    /// The elements in row-major order. Fails if `T` is not this tensor's dtype.
    pub fn to_vec<T: Element + Default>(&self) -> Result<Vec<T>> {
        crate::alloc::ensure_output("to_vec", self.dims(), std::mem::size_of::<T>())?;
        self.with_host_elements(|buffer, layout| match T::slice(buffer) {
            Some(data) => Ok(crate::backend::cpu::strided::map(data, layout, |x| x)),
            None => Err(Error::DType {
                op: "to_vec",
                expected: std::any::type_name::<T>(),
                found: buffer.dtype(),
            }),
        })?
    }

    /// The elements in row-major order converted to `f64`, whatever the dtype. Panics when
    /// a GPU tensor cannot be read back (a lost device) or the copy cannot be allocated;
    /// [`DynTensor::try_to_f64_vec`] says so as an error.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        self.try_to_f64_vec()
            .unwrap_or_else(|e| panic!("to_f64_vec: {e}"))
    }

    /// [`DynTensor::to_f64_vec`], with a failed readback from a GPU or an allocation the
    /// memory cannot hold as the error.
    pub fn try_to_f64_vec(&self) -> Result<Vec<f64>> {
        fn convert<T: Element + Default>(data: &[T], layout: &Layout) -> Vec<f64> {
            crate::backend::cpu::strided::map(data, layout, |x: T| x.to_f64())
        }
        crate::alloc::ensure_output("to_f64_vec", self.dims(), std::mem::size_of::<f64>())?;
        self.with_host_elements(|buffer, layout| match buffer {
            CpuBuffer::F32(v) => convert(v, layout),
            CpuBuffer::F64(v) => convert(v, layout),
            CpuBuffer::F16(v) => convert(v, layout),
            CpuBuffer::BF16(v) => convert(v, layout),
            CpuBuffer::I64(v) => convert(v, layout),
            CpuBuffer::Bool(v) => convert(v, layout),
        })
    }

    /// The single value of a one-element tensor.
    pub fn item<T: Element + Default>(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(Error::InvalidArgument {
                op: "item",
                message: format!(
                    "the tensor has shape {:?} ({} elements), not one element",
                    self.dims(),
                    self.numel()
                ),
            });
        }
        Ok(self.to_vec::<T>()?[0])
    }
}
