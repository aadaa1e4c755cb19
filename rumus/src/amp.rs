//! Automatic mixed precision (PyTorch's `torch.autocast` and `GradScaler`). Inside an
//! [`autocast`] scope, matrix products — `matmul`, `linear`, and the convolutions and
//! attention built on them — of `f32` tensors round their operands to `f16` and run on the
//! `f16` product (the GPU's matrix units, accumulating in `f32`); their results, written in
//! `f32` without a rounding to `f16` and with a `linear`'s bias added in `f32`, like
//! everything else (reductions, norms, softmax, losses), stay `f32`. The fused
//! [`scaled_dot_product_attention`](crate::DynTensor::scaled_dot_product_attention) runs on
//! the matrix units too where a GPU has them (rows 64 wide; `ops::attention` says which
//! values it rounds), and in `f32` elsewhere. Parameters stay `f32`
//! (the master weights). Each product keeps the `f16` operands it read, and the backward pass
//! runs its products on them and on the gradient rounded to `f16`, whatever scope it is
//! called in.
//!
//! Gradients of `f16` products underflow when small: scale the loss with a
//! [`GradScaler`]. [`autocast_with`]`(DType::BF16)` runs the products in bfloat16 instead
//! (f32's range, 8 bits of significand; on the CPU and CUDA, as WGSL has no bfloat16),
//! which needs no loss scaling.
//!
//! On the CPU the `f16` product runs on the `f32` kernel with the same roundings, so a
//! model's behaviour under autocast can be checked anywhere, but it is slower than plain
//! `f32` there: the speed is a GPU's.
//!
//! ```
//! use rumus::DynTensor;
//! use rumus::amp::autocast;
//!
//! # fn main() -> rumus::Result<()> {
//! let a = DynTensor::from_vec(vec![1.0f32 / 3.0; 4], &[2, 2])?;
//! let exact = a.matmul(&a)?.to_vec::<f32>()?[0];
//! let half = {
//!     let _autocast = autocast();
//!     a.matmul(&a)?.to_vec::<f32>()?[0]
//! };
//! assert_ne!(exact, half); // 1/3 rounded to f16 first
//! assert!((exact - half).abs() < 1e-3);
//! # Ok(())
//! # }
//! ```

use std::cell::RefCell;

pub use crate::optim::{GradScaler, GradScalerConfig};

use crate::autograd::{BackwardRecord, GradMeta, GraphLinks, is_grad_enabled, record};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::BackwardOp;
use crate::ops::hooks::{self, Autocast, OpCall};
use crate::ops::matmul::{
    bias_gradient, is_transposed_contiguous, product_gradients, widening_product,
};
use crate::shape::Dims;
use crate::tensor::DynTensor;

thread_local! {
    /// The `f16` (`bf16`) copies this thread's autocast scope made ([`to_half`]).
    static CASTS: RefCell<Vec<Cast>> = const { RefCell::new(Vec::new()) };
}

/// Whether products on this thread run in `f16` (or `bf16`) now.
pub fn is_autocast_enabled() -> bool {
    hooks::autocast_enabled()
}

/// The dtype products on this thread run in now: `Some(DType::F16)` inside [`autocast`],
/// `Some(DType::BF16)` inside [`autocast_with`]`(DType::BF16)`, `None` outside autocast.
pub fn autocast_dtype() -> Option<DType> {
    hooks::autocast_dtype()
}

/// Restores the previous autocast state when dropped.
#[must_use = "autocast is only on while the guard is alive: bind it with `let _autocast = ...`"]
pub struct AutocastGuard {
    previous: Option<&'static dyn Autocast>,
}

impl Drop for AutocastGuard {
    fn drop(&mut self) {
        hooks::install_autocast(self.previous);
        if self.previous.is_none() {
            CASTS.with(|casts| casts.borrow_mut().clear());
        }
    }
}

fn set_autocast(hook: Option<&'static HalfProducts>) -> AutocastGuard {
    AutocastGuard {
        previous: hooks::install_autocast(hook.map(|h| h as &'static dyn Autocast)),
    }
}

static F16_PRODUCTS: HalfProducts = HalfProducts(DType::F16);
static BF16_PRODUCTS: HalfProducts = HalfProducts(DType::BF16);

/// Runs `f32` matrix products of this thread in `f16` until the guard drops. The flag is
/// per thread, like [`no_grad`](crate::no_grad).
pub fn autocast() -> AutocastGuard {
    set_autocast(Some(&F16_PRODUCTS))
}

/// Runs `f32` matrix products of this thread in `dtype` (`DType::F16` or `DType::BF16`)
/// until the guard drops, as `torch.autocast(dtype=...)` does. `bf16` keeps `f32`'s
/// exponent range, so its gradients need no [`GradScaler`]; wgpu has no `bf16` kernels (its
/// products are an error there), the CPU and CUDA have.
///
/// # Errors
/// Any other `dtype`.
pub fn autocast_with(dtype: DType) -> Result<AutocastGuard> {
    match dtype {
        DType::F16 => Ok(autocast()),
        DType::BF16 => Ok(set_autocast(Some(&BF16_PRODUCTS))),
        other => Err(crate::error::Error::InvalidArgument {
            op: "autocast_with",
            message: format!("autocast runs products in f16 or bf16, not {other}"),
        }),
    }
}

/// Turns autocast off until the guard drops (a region that needs full precision inside an
/// autocast scope).
pub fn autocast_disabled() -> AutocastGuard {
    set_autocast(None)
}

/// The autocast hook the ops run through while a scope is active: products of `f32`
/// operands (and bias) run as [`product`]s in its dtype (`f16` or `bf16`), and so do
/// products of an `f32` operand with one already in that dtype (a model's 16-bit weights,
/// which need no rounding), as PyTorch's autocast multiplies them.
struct HalfProducts(DType);

impl Autocast for HalfProducts {
    fn dtype(&self) -> DType {
        self.0
    }

    fn applies(&self, call: &OpCall<'_>, operands: &[&DynTensor]) -> bool {
        let takes = |t: &DynTensor| t.dtype() == DType::F32 || t.dtype() == self.0;
        matches!(
            (call, operands),
            (OpCall::Product, [lhs, rhs, ..])
                if takes(lhs) && takes(rhs) && (lhs.dtype() == DType::F32 || rhs.dtype() == DType::F32)
        )
    }

    fn run(&self, _call: &OpCall<'_>, operands: &[&DynTensor]) -> Result<DynTensor> {
        match operands {
            [lhs, rhs, bias @ ..] => product(lhs, rhs, bias.first().copied(), self.0),
            _ => Err(crate::error::Error::InvalidArgument {
                op: "autocast",
                message: format!("a product takes two operands, got {}", operands.len()),
            }),
        }
    }
}

/// An `f16` copy an autocast scope made of a view: self-attention's queries, keys and values
/// project one input, which is then rounded once, and their backward passes share that one
/// copy (on GPT-2 small, two `[8192, 768]` casts and copies fewer per block). The source's
/// version rules out a copy made before an in-place write. An entry goes as soon as nothing
/// but the cache holds its source or its copy, so the cache keeps no memory past the next
/// cast, and all go when the scope ends.
struct Cast {
    /// Views of their own (`detach`), so the storages' counts say who else holds them.
    source: DynTensor,
    version: u64,
    half: DynTensor,
}

impl Cast {
    fn held_elsewhere(&self) -> bool {
        let held = |t: &DynTensor| triomphe::Arc::count(t.storage()) > 1;
        held(&self.source) && held(&self.half)
    }

    fn is_of(&self, t: &DynTensor, dtype: DType) -> bool {
        self.half.dtype() == dtype
            && triomphe::Arc::ptr_eq(self.source.storage(), t.storage())
            && self.source.layout() == t.layout()
            && self.version == t.storage().version()
    }
}

/// `t` rounded to `dtype` (see [`round_to_half`]), or the copy this scope already made of it.
fn to_half(t: &DynTensor, dtype: DType) -> Result<DynTensor> {
    let cached = CASTS.with(|casts| {
        let mut casts = casts.borrow_mut();
        casts.retain(Cast::held_elsewhere);
        casts
            .iter()
            .find(|c| c.is_of(t, dtype))
            .map(|c| c.half.detach())
    });
    if let Some(half) = cached {
        return Ok(half);
    }
    let half = round_to_half(t, dtype)?;
    CASTS.with(|casts| {
        casts.borrow_mut().push(Cast {
            source: t.detach(),
            version: t.storage().version(),
            half: half.detach(),
        })
    });
    Ok(half)
}

/// `t` rounded to `dtype` (`f16` or `bf16`), untracked, in the same layout: the transpose of
/// contiguous memory (a `Linear` weight as the product reads it) is converted as the
/// contiguous memory it is and transposed back, so the cast reads in order and the product
/// sees the layout it would have seen in `f32`.
fn round_to_half(t: &DynTensor, dtype: DType) -> Result<DynTensor> {
    if is_transposed_contiguous(t)? {
        t.detach()
            .transpose(-1, -2)?
            .to_dtype(dtype)?
            .transpose(-1, -2)
    } else {
        t.detach().to_dtype(dtype)
    }
}

/// What the backward pass of an autocast product keeps: the `f16` operands the product read
/// (its own backward products read them again instead of rounding the operands anew), and
/// where on the graph the operands are, but not the `f32` operands themselves. As with
/// PyTorch's autocast, which saves the cast copies, an activation that only products read
/// (a norm's output, an activation function's) is freed as soon as the forward pass drops
/// it: three of each GPT-2 block's activations (BENCHMARKS.md has the peak it saved). So a
/// write into an operand after the product no longer affects its gradients.
pub struct HalfProductRecord {
    lhs_half: DynTensor,
    rhs_half: DynTensor,
    /// The operands' places on the graph (`None` for one that takes no gradient), for a
    /// recorded backward pass, whose products must reach them.
    lhs_meta: Option<GradMeta>,
    rhs_meta: Option<GradMeta>,
    /// The bias's shape, when the product added one (the third input).
    bias_dims: Option<Dims>,
}

impl BackwardRecord for HalfProductRecord {
    fn name(&self) -> &'static str {
        "matmul"
    }

    fn backward(&self, grad: &DynTensor, needs: &[bool]) -> Result<Vec<Option<DynTensor>>> {
        half_product_backward(self, grad, needs)
    }

    /// The operands' graph places: what a dropping graph frees iteratively.
    fn take_graph(&mut self, links: &mut GraphLinks) {
        links.push_meta(self.lhs_meta.take());
        links.push_meta(self.rhs_meta.take());
    }
}

impl HalfProductRecord {
    /// An operand as a recorded backward pass multiplies it: the `f16` copy widened (the
    /// values autocast rounds the operand to, so its products round it to the same), whose
    /// gradient goes unchanged to the operand, as autocast's products treat the rounding.
    fn operand_on_graph(half: &DynTensor, meta: &Option<GradMeta>) -> Result<DynTensor> {
        let widened = half.to_dtype(DType::F32)?;
        Ok(match meta {
            Some(meta) => {
                let operand = half.clone().with_grad_meta(meta.clone());
                record(widened, &[&operand], || BackwardOp::Contiguous)
            }
            None => widened,
        })
    }
}

/// `lhs @ rhs (+ bias)` with the operands rounded to `dtype` (`f16` or `bf16`), multiplied
/// and accumulated in `f32` (by one kernel on a GPU, which also adds the `f32` bias), the
/// result `f32`.
pub(crate) fn product(
    lhs: &DynTensor,
    rhs: &DynTensor,
    bias: Option<&DynTensor>,
    dtype: DType,
) -> Result<DynTensor> {
    let (lhs_half, rhs_half) = (to_half(lhs, dtype)?, to_half(rhs, dtype)?);
    let out = widening_product(&lhs_half, &rhs_half, bias.map(DynTensor::detach).as_ref())?;
    let inputs: Vec<&DynTensor> = [lhs, rhs].into_iter().chain(bias).collect();
    Ok(record(out, &inputs, || HalfProductRecord {
        lhs_half,
        rhs_half,
        lhs_meta: lhs.grad_meta().cloned(),
        rhs_meta: rhs.grad_meta().cloned(),
        bias_dims: bias.map(|b| Dims::from_slice(b.dims())),
    }))
}

/// The gradients of an autocast product's operands (and bias): `f16` products of the
/// gradient rounded once and the saved `f16` operands, widened to `f32`. A recorded backward
/// pass (`create_graph`) runs the `f32` formula under autocast instead, on the saved operands
/// tracked back to the operands, so its gradients stay differentiable.
fn half_product_backward(
    record: &HalfProductRecord,
    grad: &DynTensor,
    needs: &[bool],
) -> Result<Vec<Option<DynTensor>>> {
    let mut grads = if is_grad_enabled() {
        let lhs = HalfProductRecord::operand_on_graph(&record.lhs_half, &record.lhs_meta)?;
        let rhs = HalfProductRecord::operand_on_graph(&record.rhs_half, &record.rhs_meta)?;
        let _autocast = autocast_with(record.lhs_half.dtype())?;
        product_gradients(grad, (&lhs, &rhs), &needs[..2], &|x, y| x.matmul(y))?
    } else {
        let grad_half = grad.detach().to_dtype(record.lhs_half.dtype())?;
        let operands = (&record.lhs_half, &record.rhs_half);
        product_gradients(&grad_half, operands, &needs[..2], &|x, y| {
            widening_product(x, y, None)
        })?
    };
    if let Some(bias_dims) = &record.bias_dims {
        grads.push(bias_gradient(grad, bias_dims, needs[2])?);
    }
    Ok(grads)
}
