//! [`Checkpointed`]: a module whose activations are recomputed in the backward pass instead
//! of kept (activation checkpointing, [`crate::autograd::checkpoint`]), for models whose
//! activations do not fit in memory. Wrap each block of a deep stack; its parameters,
//! buffers, training mode and state dict are the wrapped module's.

use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::forward::Forward;
use super::module::Module;
use crate::autograd::checkpoint;
use crate::element::Element;
use crate::error::Result;
use crate::shape::Shape;
use crate::tensor::{DynTensor, Tensor};

/// `M`, run under [`checkpoint`](crate::autograd::checkpoint) on every forward pass.
///
/// The backward pass runs the block again, so it needs the module after the forward pass
/// returns: the wrapper shares it with the recorded graph (behind a lock that only
/// [`Module::set_training`] writes through).
///
/// ```
/// use rumus::prelude::*;
/// use rumus::nn::{Checkpointed, Forward};
///
/// # fn main() -> rumus::Result<()> {
/// let block = Checkpointed::new(Linear::<8, 8>::new()?);
/// let x: Tensor<(Dyn, D<8>)> = DynTensor::ones(&[4, 8], DType::F32)?.try_shape()?;
/// let loss = block.forward_typed(&x)?.erase().tanh()?.sum_all()?;
/// let grads = loss.backward()?;
/// assert_eq!(grads.len(), 2); // the weight and the bias
/// # Ok(())
/// # }
/// ```
pub struct Checkpointed<M> {
    inner: Arc<RwLock<M>>,
}

impl<M> Checkpointed<M> {
    /// Wraps `module`.
    pub fn new(module: M) -> Self {
        Checkpointed {
            inner: Arc::new(RwLock::new(module)),
        }
    }

    /// The wrapped module, to read.
    pub fn inner(&self) -> RwLockReadGuard<'_, M> {
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// The wrapped module, to change.
    pub fn inner_mut(&self) -> RwLockWriteGuard<'_, M> {
        self.inner.write().unwrap_or_else(|p| p.into_inner())
    }
}

impl<M: Send + Sync + 'static> Checkpointed<M> {
    /// `forward(module, inputs)` run under [`checkpoint`]: any call of the wrapped module,
    /// for modules that take more than one tensor or options besides (what `#[model]` emits
    /// for a `Checkpointed` field of a known layer).
    ///
    /// ```
    /// use rumus::prelude::*;
    /// use rumus::nn::{Checkpointed, MultiheadAttention};
    ///
    /// # fn main() -> rumus::Result<()> {
    /// let attention = Checkpointed::new(MultiheadAttention::<8, 2>::new()?);
    /// let x = DynTensor::randn(&[3, 5, 8], DType::F32)?;
    /// let out = attention.forward_with(&[&x], |attention, x| {
    ///     attention.forward_dyn(&x[0], &x[0], &x[0], None, true)
    /// })?;
    /// assert_eq!(out.dims(), [3, 5, 8]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn forward_with<F>(&self, inputs: &[&DynTensor], forward: F) -> Result<DynTensor>
    where
        F: Fn(&M, &[DynTensor]) -> Result<DynTensor> + Send + Sync + 'static,
    {
        let module = self.inner.clone();
        checkpoint(inputs, move |inputs| {
            let module = module.read().unwrap_or_else(|p| p.into_inner());
            forward(&module, inputs)
        })
    }
}

impl<M: Module> Module for Checkpointed<M> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        self.inner().visit(prefix, f);
    }

    fn visit_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        self.inner().visit_buffers(prefix, f);
    }

    fn set_training(&self, training: bool) {
        self.inner().set_training(training);
    }

    fn training(&self) -> Option<bool> {
        self.inner().training()
    }

    fn describe(&self) -> String {
        format!("Checkpointed({})", self.inner().describe())
    }
}

#[diagnostic::do_not_recommend]
impl<In, E, M> Forward<In, E> for Checkpointed<M>
where
    In: Shape + 'static,
    E: Element,
    M: Forward<In, E> + Send + Sync + 'static,
{
    type Out = M::Out;

    fn forward_typed(&self, x: &Tensor<In, E>) -> Result<Tensor<Self::Out>> {
        let out = self.forward_with(&[x.as_dyn()], |module, inputs| {
            let x = Tensor::<In, E>::wrap(inputs[0].clone());
            Ok(module.forward_typed(&x)?.erase())
        })?;
        Ok(Tensor::wrap(out))
    }
}
