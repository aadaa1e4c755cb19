//! [`ZeroRedundancyOptimizer`]: optimizer-state sharding (ZeRO stage 1). Under plain
//! data-parallel training every rank keeps the whole optimizer state (Adam: two more copies
//! of the model). Here the parameters are cut into one contiguous run per rank, balanced by
//! element count; each rank's inner optimizer holds state for its own run only and updates
//! only it, and an all-gather then hands every rank the others' updated parameters.
//!
//! The update of each parameter is the same computation its owner's plain optimizer would
//! do, and parameters travel as exact copies, so training is bit for bit that of
//! [`DistributedDataParallel`](super::DistributedDataParallel) with the unsharded optimizer.

use std::sync::Arc;

use super::collective::{Collective, Elements, distributed_error};
use crate::autograd::{GradientStore, no_grad};
use crate::dtype::DType;
use crate::error::Result;
use crate::optim::Optimizer;
use crate::tensor::DynTensor;

/// An optimizer whose state is split across ranks.
pub struct ZeroRedundancyOptimizer<O: Optimizer> {
    comm: Arc<dyn Collective>,
    params: Vec<DynTensor>,
    /// The first parameter of each rank's run, and one past the last rank's.
    bounds: Vec<usize>,
    /// The optimizer of this rank's run (`None` when the run is empty: more ranks than
    /// parameters).
    inner: Option<O>,
}

impl<O: Optimizer> ZeroRedundancyOptimizer<O> {
    /// Splits `params` (the same list, in the same order, on every rank) and builds this
    /// rank's optimizer over its run with `make`, e.g. `|own| Adam::new(own, config)`.
    pub fn new(
        comm: Arc<dyn Collective>,
        params: Vec<DynTensor>,
        make: impl FnOnce(Vec<DynTensor>) -> Result<O>,
    ) -> Result<Self> {
        if let Some(p) = params.iter().find(|p| p.dtype() != DType::F32) {
            return Err(distributed_error(
                "ZeroRedundancyOptimizer::new",
                format!(
                    "a parameter {:?} is {}; sharding supports f32 parameters",
                    p.dims(),
                    p.dtype()
                ),
            ));
        }
        let bounds = split(&params, comm.world_size());
        let own = params[bounds[comm.rank()]..bounds[comm.rank() + 1]].to_vec();
        let inner = if own.is_empty() {
            None
        } else {
            Some(make(own)?)
        };
        Ok(ZeroRedundancyOptimizer {
            comm,
            params,
            bounds,
            inner,
        })
    }

    /// The parameters this rank updates and keeps state for.
    pub fn owned(&self) -> &[DynTensor] {
        &self.params[self.bounds[self.comm.rank()]..self.bounds[self.comm.rank() + 1]]
    }

    /// This rank's optimizer (for its learning rates, schedules and state).
    pub fn inner(&self) -> Option<&O> {
        self.inner.as_ref()
    }

    pub fn inner_mut(&mut self) -> Option<&mut O> {
        self.inner.as_mut()
    }

    /// Updates this rank's run from `grads` (gradients averaged over the ranks, as
    /// [`DistributedDataParallel::backward`](super::DistributedDataParallel::backward)
    /// returns them), then gathers every run onto every rank. The gradients of all
    /// `params` are taken out of `grads`.
    pub fn step(&mut self, grads: &mut GradientStore) -> Result<()> {
        let (start, end) = (
            self.bounds[self.comm.rank()],
            self.bounds[self.comm.rank() + 1],
        );
        for (i, param) in self.params.iter().enumerate() {
            if i < start || i >= end {
                grads.remove(param);
            }
        }
        if let Some(inner) = self.inner.as_mut() {
            inner.step(grads)?;
        }
        let mut local: Vec<f32> = Vec::new();
        for param in self.owned() {
            local.extend(param.to_vec::<f32>()?);
        }
        let counts: Vec<usize> = self
            .bounds
            .windows(2)
            .map(|run| {
                self.params[run[0]..run[1]]
                    .iter()
                    .map(DynTensor::numel)
                    .sum()
            })
            .collect();
        let mut gathered = vec![0f32; counts.iter().sum()];
        self.comm.all_gather(
            Elements::F32(&mut local),
            Elements::F32(&mut gathered),
            &counts,
        )?;
        let _guard = no_grad();
        let mut offset = 0;
        for (i, param) in self.params.iter().enumerate() {
            let n = param.numel();
            if i < start || i >= end {
                let values =
                    DynTensor::from_vec(gathered[offset..offset + n].to_vec(), param.dims())?;
                param.copy_(&values.to(&param.device())?)?;
            }
            offset += n;
        }
        Ok(())
    }
}

/// Cuts `params` into `ranks` contiguous runs of about equal element counts: run `r` ends at
/// the first parameter whose running total reaches `(r + 1) / ranks` of the whole.
fn split(params: &[DynTensor], ranks: usize) -> Vec<usize> {
    let total: usize = params.iter().map(DynTensor::numel).sum();
    let mut bounds = vec![0];
    let mut running = 0;
    let mut next = 0;
    for r in 0..ranks {
        let target = (r + 1) * total / ranks;
        while next < params.len() && running < target {
            running += params[next].numel();
            next += 1;
        }
        bounds.push(if r + 1 == ranks { params.len() } else { next });
    }
    bounds
}
