//! Where gradients land. The store only ever accumulates; optimizers take out (drain) the
//! gradients of their own parameters, so several optimizers can share one backward pass.

use std::collections::HashMap;

use super::node::TensorId;
use crate::error::{AutogradError, Result};
use crate::tensor::DynTensor;

/// Gradients of leaf tensors keyed by their [`TensorId`].
#[derive(Default, Clone)]
pub struct GradientStore {
    grads: HashMap<TensorId, DynTensor>,
}

impl GradientStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    pub(crate) fn from_map(grads: HashMap<TensorId, DynTensor>) -> Self {
        GradientStore { grads }
    }

    /// The gradient of `tensor`, if one was computed.
    pub fn get(&self, tensor: &DynTensor) -> Option<&DynTensor> {
        self.grads.get(&tensor.id()?)
    }

    /// The gradient of `tensor`, or an error that says why there is none.
    pub fn grad(&self, tensor: &DynTensor) -> Result<&DynTensor> {
        let Some(id) = tensor.id() else {
            return Err(AutogradError::MissingGradient {
                id: 0,
                shape: tensor.dims().to_vec(),
                reason: "the tensor does not require a gradient; call `.requires_grad_()` on it before the forward pass".into(),
            }
            .into());
        };
        self.grads.get(&id).ok_or_else(|| {
            AutogradError::MissingGradient {
                id: id.get(),
                shape: tensor.dims().to_vec(),
                reason: "the loss does not depend on it, or its gradient was already taken from the store".into(),
            }
            .into()
        })
    }

    /// Takes the gradient of `tensor` out of the store (what an optimizer does with its own
    /// parameters).
    pub fn remove(&mut self, tensor: &DynTensor) -> Option<DynTensor> {
        self.grads.remove(&tensor.id()?)
    }

    /// Adds `grad` to what is stored for `id` (the only way a stored gradient changes).
    pub fn accumulate(&mut self, id: TensorId, grad: DynTensor) -> Result<()> {
        accumulate_into(&mut self.grads, id, grad)
    }

    /// Adds every gradient of `other` into this store: gradient accumulation over
    /// micro-batches.
    pub fn merge(&mut self, other: GradientStore) -> Result<()> {
        for (id, grad) in other.grads {
            self.accumulate(id, grad)?;
        }
        Ok(())
    }

    /// Number of stored gradients.
    pub fn len(&self) -> usize {
        self.grads.len()
    }

    /// Whether no gradient is stored.
    pub fn is_empty(&self) -> bool {
        self.grads.is_empty()
    }

    /// Ids of every stored gradient.
    pub fn ids(&self) -> impl Iterator<Item = TensorId> + '_ {
        self.grads.keys().copied()
    }
}

impl std::fmt::Debug for GradientStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut ids: Vec<u64> = self.grads.keys().map(|id| id.get()).collect();
        ids.sort_unstable();
        write!(
            f,
            "GradientStore({} gradients for tensors {ids:?})",
            ids.len()
        )
    }
}

pub(crate) fn accumulate_into(
    map: &mut HashMap<TensorId, DynTensor>,
    id: TensorId,
    grad: DynTensor,
) -> Result<()> {
    let Some(existing) = map.get(&id) else {
        map.insert(id, grad);
        return Ok(());
    };
    if existing.dims() != grad.dims() || existing.dtype() != grad.dtype() {
        return Err(crate::error::ShapeError::Invalid {
            context: format!("accumulating the gradient of tensor #{}", id.get()),
            message: format!(
                "stored gradient is {:?} {}, the new one {:?} {}; they must match exactly",
                existing.dims(),
                existing.dtype(),
                grad.dims(),
                grad.dtype()
            ),
        }
        .into());
    }
    let sum = existing.add(&grad)?;
    map.insert(id, sum);
    Ok(())
}
