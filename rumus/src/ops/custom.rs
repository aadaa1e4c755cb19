//! Ops defined outside rumus: a [`CustomOp`] supplies its output shape, CPU kernels for the
//! forward and backward passes (written once, generic over `f32`/`f64`), and optionally WGSL
//! kernels for the GPU. [`apply`] runs one and records it on the tape like a built-in op, so
//! `backward`, `grad`, optimizers and `gradcheck` work through it unchanged.
//!
//! ```
//! use std::sync::Arc;
//! use rumus::ops::custom::{self, CustomOp, Input};
//! use rumus::element::Float;
//! use rumus::DynTensor;
//!
//! /// `x^2`, one element at a time.
//! struct Square;
//!
//! impl CustomOp for Square {
//!     fn name(&self) -> &'static str {
//!         "square"
//!     }
//!     fn output_dims(&self, inputs: &[&[usize]]) -> rumus::Result<Vec<usize>> {
//!         Ok(inputs[0].to_vec())
//!     }
//!     fn forward<T: Float>(&self, inputs: &[Input<'_, T>], out: &mut [T]) -> rumus::Result<()> {
//!         for (o, &x) in out.iter_mut().zip(inputs[0].data) {
//!             *o = x * x;
//!         }
//!         Ok(())
//!     }
//!     fn backward<T: Float>(
//!         &self,
//!         inputs: &[Input<'_, T>],
//!         _output: &[T],
//!         grad_output: &[T],
//!         grads: &mut [Option<&mut [T]>],
//!     ) -> rumus::Result<()> {
//!         if let Some(g) = grads[0].as_deref_mut() {
//!             for ((g, &x), &dy) in g.iter_mut().zip(inputs[0].data).zip(grad_output) {
//!                 *g = (x + x) * dy;
//!             }
//!         }
//!         Ok(())
//!     }
//! }
//!
//! # fn main() -> rumus::Result<()> {
//! let x = DynTensor::from_vec(vec![1.0f32, -3.0], &[2])?.requires_grad_()?;
//! let y = custom::apply(&Arc::new(Square), &[&x])?;
//! assert_eq!(y.to_vec::<f32>()?, [1.0, 9.0]);
//! let grads = y.sum_all()?.backward()?;
//! assert_eq!(grads.grad(&x)?.to_vec::<f32>()?, [2.0, -6.0]);
//! # Ok(())
//! # }
//! ```

use std::ops::Range;
use std::sync::Arc;

use super::BackwardOp;
use crate::autograd::{Saved, is_grad_enabled, record};
use crate::backend::kinds::CustomKernel;
use crate::dtype::DType;
use crate::element::{Element, Float};
use crate::error::{AutogradError, Error, Result};
use crate::storage::{CpuBuffer, HostView, Operand, Storage};
use crate::tensor::DynTensor;

/// One input of a custom op's CPU kernel: its elements in row-major order and its shape.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a, T> {
    /// The elements, contiguous, row-major.
    pub data: &'a [T],
    /// The shape.
    pub dims: &'a [usize],
}

pub use crate::backend::kinds::{MAX_GPU_INPUTS, MAX_WGSL_PARAMS, Wgsl};

/// An op defined outside rumus. See the [module docs](self) for an example.
///
/// Kernels get contiguous row-major inputs of one float dtype (`f32` or `f64`, chosen by the
/// inputs) and a zeroed output; the backward gets zeroed gradients only for the inputs that
/// need one (`None` elsewhere). The op's backward is not recorded itself, so a graph through
/// it has no second derivative: `grad(.., create_graph = true)` reports an error naming it.
pub trait CustomOp: Send + Sync + 'static {
    /// The op's name on the tape and in error messages.
    fn name(&self) -> &'static str;

    /// The output's shape from the inputs' shapes; an error for shapes the op does not take.
    fn output_dims(&self, inputs: &[&[usize]]) -> Result<Vec<usize>>;

    /// Writes the output (of [`output_dims`](Self::output_dims)) into `out`.
    fn forward<T: Float>(&self, inputs: &[Input<'_, T>], out: &mut [T]) -> Result<()>;

    /// Writes into `grads[k]` (when `Some`) the gradient of input `k` given the gradient of
    /// the output; `output` is what the forward pass wrote.
    fn backward<T: Float>(
        &self,
        inputs: &[Input<'_, T>],
        output: &[T],
        grad_output: &[T],
        grads: &mut [Option<&mut [T]>],
    ) -> Result<()>;

    /// The op's GPU kernels. Without them, the op on GPU tensors is an error (rumus moves
    /// no tensor between devices behind the user's back).
    fn wgsl(&self) -> Option<Wgsl> {
        None
    }

    /// Words the GPU kernels read from `p[16]` on (scalars as `f32::to_bits`), at most
    /// [`MAX_WGSL_PARAMS`].
    fn wgsl_params(&self) -> Vec<u32> {
        Vec::new()
    }
}

/// The object-safe face of a [`CustomOp`], kept in its tape record: the generic kernels
/// instantiated for each float dtype.
pub(crate) trait ErasedCustomOp: Send + Sync {
    fn name(&self) -> &'static str;
    fn output_dims(&self, inputs: &[&[usize]]) -> Result<Vec<usize>>;
    fn wgsl(&self) -> Option<Wgsl>;
    fn wgsl_params(&self) -> Vec<u32>;
    fn forward_f32(&self, inputs: &[Input<'_, f32>], out: &mut [f32]) -> Result<()>;
    fn forward_f64(&self, inputs: &[Input<'_, f64>], out: &mut [f64]) -> Result<()>;
    fn backward_f32(&self, args: BackwardArgs<'_, '_, f32>) -> Result<()>;
    fn backward_f64(&self, args: BackwardArgs<'_, '_, f64>) -> Result<()>;
}

/// What a backward kernel reads and writes.
pub(crate) struct BackwardArgs<'a, 'g, T> {
    inputs: &'a [Input<'a, T>],
    output: &'a [T],
    grad_output: &'a [T],
    grads: &'a mut [Option<&'g mut [T]>],
}

impl<O: CustomOp> ErasedCustomOp for O {
    fn name(&self) -> &'static str {
        CustomOp::name(self)
    }
    fn output_dims(&self, inputs: &[&[usize]]) -> Result<Vec<usize>> {
        CustomOp::output_dims(self, inputs)
    }
    fn wgsl(&self) -> Option<Wgsl> {
        CustomOp::wgsl(self)
    }
    fn wgsl_params(&self) -> Vec<u32> {
        CustomOp::wgsl_params(self)
    }
    fn forward_f32(&self, inputs: &[Input<'_, f32>], out: &mut [f32]) -> Result<()> {
        self.forward(inputs, out)
    }
    fn forward_f64(&self, inputs: &[Input<'_, f64>], out: &mut [f64]) -> Result<()> {
        self.forward(inputs, out)
    }
    fn backward_f32(&self, a: BackwardArgs<'_, '_, f32>) -> Result<()> {
        self.backward(a.inputs, a.output, a.grad_output, a.grads)
    }
    fn backward_f64(&self, a: BackwardArgs<'_, '_, f64>) -> Result<()> {
        self.backward(a.inputs, a.output, a.grad_output, a.grads)
    }
}

/// A float element type's entry points into an [`ErasedCustomOp`].
trait Kernels: Float {
    fn forward(op: &dyn ErasedCustomOp, inputs: &[Input<'_, Self>], out: &mut [Self])
    -> Result<()>;
    fn backward(op: &dyn ErasedCustomOp, args: BackwardArgs<'_, '_, Self>) -> Result<()>;
}

impl Kernels for f32 {
    fn forward(op: &dyn ErasedCustomOp, inputs: &[Input<'_, f32>], out: &mut [f32]) -> Result<()> {
        op.forward_f32(inputs, out)
    }
    fn backward(op: &dyn ErasedCustomOp, args: BackwardArgs<'_, '_, f32>) -> Result<()> {
        op.backward_f32(args)
    }
}

impl Kernels for f64 {
    fn forward(op: &dyn ErasedCustomOp, inputs: &[Input<'_, f64>], out: &mut [f64]) -> Result<()> {
        op.forward_f64(inputs, out)
    }
    fn backward(op: &dyn ErasedCustomOp, args: BackwardArgs<'_, '_, f64>) -> Result<()> {
        op.backward_f64(args)
    }
}

/// The tape record of a custom op: the op and the tensors its backward reads.
pub struct CustomRecord {
    pub(crate) op: Arc<dyn ErasedCustomOp>,
    /// The inputs, contiguous, detached.
    pub(crate) inputs: Vec<Saved>,
    /// The forward's output, detached: the record must not own the graph node it belongs to.
    pub(crate) output: Saved,
}

impl CustomRecord {
    /// The op's name.
    pub fn name(&self) -> &'static str {
        self.op.name()
    }

    pub(crate) fn take_saved(self) -> impl Iterator<Item = DynTensor> {
        self.inputs
            .into_iter()
            .chain(std::iter::once(self.output))
            .map(Saved::into_tensor)
    }
}

/// Runs `op` on `inputs` and records it for the backward pass when an input requires a
/// gradient. Inputs must share one float dtype and one device.
pub fn apply<O: CustomOp>(op: &Arc<O>, inputs: &[&DynTensor]) -> Result<DynTensor> {
    let op: Arc<dyn ErasedCustomOp> = op.clone();
    let name = op.name();
    if inputs.is_empty() {
        return Err(Error::InvalidArgument {
            op: name,
            message: "a custom op needs at least one input tensor".into(),
        });
    }
    let dtype = common_float_dtype(name, inputs)?;
    let contiguous: Vec<DynTensor> = inputs
        .iter()
        .map(|t| t.contiguous_untracked())
        .collect::<Result<_>>()?;
    let dims: Vec<&[usize]> = contiguous.iter().map(DynTensor::dims).collect();
    let out_dims = op.output_dims(&dims)?;
    let output = run_forward(&*op, dtype, &contiguous, &out_dims)?;
    Ok(record(output.clone(), inputs, || {
        BackwardOp::Custom(Box::new(CustomRecord {
            op,
            inputs: contiguous.iter().map(Saved::new).collect(),
            output: Saved::new(&output.detach()),
        }))
    }))
}

/// The one float dtype of all inputs.
fn common_float_dtype(name: &'static str, inputs: &[&DynTensor]) -> Result<DType> {
    let dtype = inputs[0].dtype();
    if !matches!(dtype, DType::F32 | DType::F64) {
        return Err(Error::DType {
            op: name,
            expected: "f32 or f64 tensors",
            found: dtype,
        });
    }
    if let Some(other) = inputs.iter().find(|t| t.dtype() != dtype) {
        return Err(Error::DTypeMismatch {
            op: name,
            lhs: dtype,
            rhs: other.dtype(),
        });
    }
    Ok(dtype)
}

/// The host elements of contiguous tensors, one read lock per distinct storage (an op may
/// get the same tensor twice).
struct HostInputs<'a> {
    views: Vec<HostView<'a>>,
    /// Per tensor: which view, and the range of its elements there.
    slots: Vec<(usize, Range<usize>)>,
}

impl<'a> HostInputs<'a> {
    fn read(tensors: &'a [DynTensor]) -> Result<Self> {
        let mut storages: Vec<&'a crate::storage::Storage> = Vec::new();
        let mut slots = Vec::with_capacity(tensors.len());
        for tensor in tensors {
            let storage: &crate::storage::Storage = tensor.storage();
            let view = match storages.iter().position(|s| std::ptr::eq(*s, storage)) {
                Some(k) => k,
                None => {
                    storages.push(storage);
                    storages.len() - 1
                }
            };
            let range = tensor
                .contiguous_range()
                .expect("custom-op inputs are made contiguous");
            slots.push((view, range));
        }
        Ok(HostInputs {
            views: storages.iter().map(|s| s.read()).collect::<Result<_>>()?,
            slots,
        })
    }

    /// Tensor `k`'s elements as `T`, which is the dtype every input was checked to have.
    fn slice<T: Element>(&self, k: usize, name: &'static str) -> Result<&[T]> {
        let (view, range) = &self.slots[k];
        let buffer: &CpuBuffer = &self.views[*view];
        T::slice(buffer)
            .map(|all| &all[range.clone()])
            .ok_or(Error::DType {
                op: name,
                expected: "f32 or f64 tensors",
                found: buffer.dtype(),
            })
    }

    fn inputs<'s, T: Element>(
        &'s self,
        tensors: &'s [DynTensor],
        name: &'static str,
    ) -> Result<Vec<Input<'s, T>>> {
        tensors
            .iter()
            .enumerate()
            .map(|(k, t)| {
                Ok(Input {
                    data: self.slice(k, name)?,
                    dims: t.dims(),
                })
            })
            .collect()
    }
}

/// The op's kernels as a backend takes them.
fn kernel_of(op: &dyn ErasedCustomOp) -> CustomKernel {
    CustomKernel {
        name: op.name(),
        wgsl: op.wgsl(),
        params: op.wgsl_params(),
    }
}

/// The forward pass on the inputs' device.
fn run_forward(
    op: &dyn ErasedCustomOp,
    dtype: DType,
    inputs: &[DynTensor],
    out_dims: &[usize],
) -> Result<DynTensor> {
    let name = op.name();
    let operands: Vec<Operand<'_>> = inputs.iter().map(DynTensor::operand).collect();
    if let Some(out) = Storage::custom_forward(&kernel_of(op), &operands, out_dims)? {
        return Ok(DynTensor::computed(out, out_dims));
    }
    crate::alloc::ensure_output(name, out_dims, dtype.size_in_bytes())?;
    let numel: usize = out_dims.iter().product();
    let host = HostInputs::read(inputs)?;
    let buffer = match dtype {
        DType::F64 => cpu_forward::<f64>(op, &host, inputs, numel)?,
        _ => cpu_forward::<f32>(op, &host, inputs, numel)?,
    };
    Ok(DynTensor::from_buffer(buffer, out_dims))
}

fn cpu_forward<T: Kernels>(
    op: &dyn ErasedCustomOp,
    host: &HostInputs<'_>,
    tensors: &[DynTensor],
    numel: usize,
) -> Result<CpuBuffer> {
    let inputs = host.inputs::<T>(tensors, op.name())?;
    let mut out = vec![T::ZERO; numel];
    T::forward(op, &inputs, &mut out)?;
    Ok(T::into_buffer(out))
}

/// Gradients of a custom op's inputs (the record's backward formula).
pub(crate) fn custom_backward(
    record: &CustomRecord,
    grad: &DynTensor,
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let op = &*record.op;
    let name = op.name();
    if is_grad_enabled() {
        // `create_graph`: the kernels below would hand back gradients with no graph, and a
        // second derivative through them would be silently zero.
        return Err(AutogradError::NoDoubleBackward { op: name }.into());
    }
    let inputs = record
        .inputs
        .iter()
        .map(|s| s.get(name).cloned())
        .collect::<Result<Vec<_>>>()?;
    let output = record.output.get(name)?.clone();
    let grad = grad.contiguous_untracked()?;
    let operands: Vec<Operand<'_>> = inputs.iter().map(DynTensor::operand).collect();
    let saved = (output.operand(), grad.operand());
    if let Some(grads) = Storage::custom_backward(&kernel_of(op), &operands, saved, needs)? {
        return Ok(grads
            .into_iter()
            .zip(&inputs)
            .map(|(g, input)| g.map(|g| DynTensor::computed(g, input.dims())))
            .collect());
    }
    let mut tensors = inputs;
    tensors.extend([output, grad]);
    let host = HostInputs::read(&tensors)?;
    match tensors[0].dtype() {
        DType::F64 => cpu_backward::<f64>(op, &host, &tensors, needs),
        _ => cpu_backward::<f32>(op, &host, &tensors, needs),
    }
}

/// `tensors` holds the inputs, then the output, then the output's gradient.
fn cpu_backward<T: Kernels>(
    op: &dyn ErasedCustomOp,
    host: &HostInputs<'_>,
    tensors: &[DynTensor],
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let name = op.name();
    let n = tensors.len() - 2;
    let all = host.inputs::<T>(tensors, name)?;
    let (inputs, rest) = all.split_at(n);
    let mut grads: Vec<Option<Vec<T>>> = inputs
        .iter()
        .zip(needs)
        .map(|(input, &need)| need.then(|| vec![T::ZERO; input.data.len()]))
        .collect();
    let mut slices: Vec<Option<&mut [T]>> = grads.iter_mut().map(|g| g.as_deref_mut()).collect();
    T::backward(
        op,
        BackwardArgs {
            inputs,
            output: rest[0].data,
            grad_output: rest[1].data,
            grads: &mut slices,
        },
    )?;
    Ok(grads
        .into_iter()
        .zip(inputs)
        .map(|(g, input)| g.map(|g| DynTensor::from_buffer(T::into_buffer(g), input.dims)))
        .collect())
}
