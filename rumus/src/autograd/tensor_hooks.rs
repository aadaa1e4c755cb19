//! Backward hooks on tensors, as PyTorch's `Tensor.register_hook`: a function called with a
//! tensor's gradient once the backward pass has finished summing it, which may inspect it or
//! return a replacement that flows on in its place (to the tensor's inputs, or into the
//! returned store for a leaf).
//!
//! The hooks live in one process-wide table keyed by tensor id, since a backward pass may run
//! on any thread. The pass looks a gradient up only while some hook is installed (one atomic
//! load otherwise), so the table costs nothing to training that does not use it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::node::TensorId;
use crate::error::{Error, Result};
use crate::tensor::DynTensor;

/// A backward hook: the gradient in, `Some(replacement)` or `None` to keep it.
type GradHook = Arc<dyn Fn(&DynTensor) -> Result<Option<DynTensor>> + Send + Sync>;

/// One installed hook.
struct Installed {
    /// What its handle removes it by.
    number: u64,
    /// For hooks a module backward hook placed on a field's output: that hook's number, to
    /// remove them all with it. Such hooks also run once, then leave the table.
    owner: Option<u64>,
    hook: GradHook,
}

type Table = HashMap<TensorId, Vec<Installed>>;

/// Hooks per tensor.
static HOOKS: Mutex<Option<Table>> = Mutex::new(None);
/// How many hooks are installed; zero lets the backward pass skip the table.
static INSTALLED: AtomicUsize = AtomicUsize::new(0);
static NEXT: AtomicU64 = AtomicU64::new(1);

fn table() -> MutexGuard<'static, Option<Table>> {
    HOOKS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Removes the hooks of `tensor` that `keep` refuses, keeping the count right.
fn remove(table: &mut Option<Table>, tensor: TensorId, keep: impl Fn(&Installed) -> bool) {
    let Some(hooks) = table.as_mut() else { return };
    if let Some(list) = hooks.get_mut(&tensor) {
        let before = list.len();
        list.retain(keep);
        INSTALLED.fetch_sub(before - list.len(), Ordering::Relaxed);
        if list.is_empty() {
            hooks.remove(&tensor);
        }
    }
}

fn install(tensor: TensorId, owner: Option<u64>, hook: GradHook) -> u64 {
    let number = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut table = table();
    let list = table
        .get_or_insert_with(HashMap::new)
        .entry(tensor)
        .or_default();
    list.push(Installed {
        number,
        owner,
        hook,
    });
    INSTALLED.fetch_add(1, Ordering::Relaxed);
    number
}

/// Whether any hook is installed (the backward pass skips the table otherwise).
pub(super) fn installed() -> bool {
    INSTALLED.load(Ordering::Relaxed) > 0
}

/// Places a hook on `tensor` for the module backward hook numbered `owner`: it runs at the
/// next backward pass that reaches the tensor, then leaves; [`remove_owned`] removes those
/// that never ran.
pub(crate) fn install_once(
    tensor: TensorId,
    owner: u64,
    hook: impl Fn(&DynTensor) -> Result<Option<DynTensor>> + Send + Sync + 'static,
) {
    install(tensor, Some(owner), Arc::new(hook));
}

/// Removes every hook placed for the module backward hook `owner`.
pub(crate) fn remove_owned(owner: u64) {
    let mut table = table();
    let tensors: Vec<TensorId> = table
        .as_ref()
        .map_or(Vec::new(), |t| t.keys().copied().collect());
    for tensor in tensors {
        remove(&mut table, tensor, |h| h.owner != Some(owner));
    }
}

/// A number no hook has, for a module backward hook to own hooks by.
pub(crate) fn fresh_owner() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Keeps a tensor's backward hook installed; dropping it removes the hook.
#[must_use = "the hook is removed when the handle drops"]
pub struct GradHookHandle {
    tensor: TensorId,
    number: u64,
}

impl Drop for GradHookHandle {
    fn drop(&mut self) {
        remove(&mut table(), self.tensor, |h| h.number != self.number);
    }
}

impl DynTensor {
    /// Calls `hook` with this tensor's gradient during every backward pass that computes it,
    /// once it is complete (all paths summed), as PyTorch's `register_hook`. The hook may
    /// return a replacement of the same shape and dtype, which flows on instead (clip, rescale
    /// or zero a gradient on its way); `None` keeps it. Several hooks run in the order they
    /// were registered, each seeing the previous one's result. An error from a hook ends the
    /// backward pass with it.
    ///
    /// Fails when the tensor does not require a gradient (there would be none to see).
    ///
    /// ```
    /// use rumus::DynTensor;
    ///
    /// let x = DynTensor::from_vec(vec![1.0f32, 2.0], &[2])?.requires_grad_()?;
    /// let h = x.mul_scalar(3.0)?;
    /// // Halve the gradient that reaches `h`, and so everything before it.
    /// let _hook = h.register_hook(|grad| Ok(Some(grad.mul_scalar(0.5)?)))?;
    /// let grads = h.sum_all()?.backward()?;
    /// assert_eq!(grads.grad(&x)?.to_vec::<f32>()?, [1.5, 1.5]);
    /// # Ok::<(), rumus::Error>(())
    /// ```
    pub fn register_hook(
        &self,
        hook: impl Fn(&DynTensor) -> Result<Option<DynTensor>> + Send + Sync + 'static,
    ) -> Result<GradHookHandle> {
        let tensor = self.id().ok_or_else(|| Error::InvalidArgument {
            op: "register_hook",
            message: format!(
                "the tensor {:?} does not require a gradient, so no backward pass computes one \
                 for it; hook a parameter, or a tensor computed from one with gradients on",
                self.dims()
            ),
        })?;
        let number = install(tensor, None, Arc::new(hook));
        Ok(GradHookHandle { tensor, number })
    }
}

/// Runs the hooks of tensor `id` on its finished gradient `grad`, returning what flows on.
pub(super) fn run(id: TensorId, grad: DynTensor) -> Result<DynTensor> {
    if !installed() {
        return Ok(grad);
    }
    // Copied out of the lock: a hook may register or drop hooks itself.
    let hooks: Vec<GradHook> = {
        let mut table = table();
        let Some(list) = table.as_ref().and_then(|t| t.get(&id)) else {
            return Ok(grad);
        };
        let hooks = list.iter().map(|h| h.hook.clone()).collect();
        remove(&mut table, id, |h| h.owner.is_none());
        hooks
    };
    let mut grad = grad;
    for hook in hooks {
        if let Some(replacement) = hook(&grad)? {
            if replacement.dims() != grad.dims() || replacement.dtype() != grad.dtype() {
                return Err(Error::InvalidArgument {
                    op: "register_hook",
                    message: format!(
                        "a backward hook of tensor #{} returned a {:?} {} gradient for a {:?} \
                         {} one; a replacement must have the gradient's shape and dtype",
                        id.get(),
                        replacement.dims(),
                        replacement.dtype(),
                        grad.dims(),
                        grad.dtype()
                    ),
                });
            }
            grad = replacement;
        }
    }
    Ok(grad)
}
