//! [`ZeroRedundancyOptimizer`]: optimizer-state sharding (ZeRO stage 1). Under plain
//! data-parallel training every rank keeps the whole optimizer state (Adam: two more copies
//! of the model). Here the parameters are cut into one contiguous run per rank, balanced by
//! element count; each rank's inner optimizer holds state for its own run only and updates
//! only it, and an all-gather then hands every rank the others' updated parameters.
//!
//! The update of each parameter is the same computation its owner's plain optimizer would
//! do, and parameters travel as exact copies, so training is bit for bit that of
//! [`DistributedDataParallel`](super::DistributedDataParallel) with the unsharded optimizer.
//!
//! # Checkpoints
//!
//! [`ZeroRedundancyOptimizer::consolidated_state`] gathers the shards into the state that
//! one optimizer over all parameters (in one group) would have, so a checkpoint of a
//! sharded run is an ordinary checkpoint: it resumes sharded on any number of ranks
//! ([`ZeroRedundancyOptimizer::restore`]) or unsharded with [`Checkpoint::restore`].

use std::sync::Arc;

use super::collective::{Collective, Elements, distributed_error};
use super::same_model::check_same_tensors;
use crate::autograd::{GradientStore, no_grad};
use crate::dtype::DType;
use crate::error::Result;
use crate::io::Checkpoint;
use crate::nn::Module;
use crate::optim::{Optimizer, OptimizerState};
use crate::rng::global_state;
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
        check_same_tensors(
            &*comm,
            "ZeroRedundancyOptimizer::new",
            params
                .iter()
                .enumerate()
                .map(|(i, p)| (format!("parameter {i}"), p)),
        )?;
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

    /// This rank's optimizer, mutably (to set learning rates or restore its state).
    pub fn inner_mut(&mut self) -> Option<&mut O> {
        self.inner.as_mut()
    }

    /// Updates this rank's run from `grads` (gradients averaged over the ranks, as
    /// [`DistributedDataParallel::backward`](super::DistributedDataParallel::backward)
    /// returns them), then gathers every run onto every rank. The gradients stay in
    /// `grads`.
    pub fn step(&mut self, grads: &mut GradientStore) -> Result<()> {
        let (start, end) = (
            self.bounds[self.comm.rank()],
            self.bounds[self.comm.rank() + 1],
        );
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

impl<O: Optimizer> ZeroRedundancyOptimizer<O> {
    /// The state of one optimizer over all parameters in one group, gathered from every
    /// rank's shard (a collective: every rank calls it, every rank receives the whole
    /// state). Parameter `j` of the list given to [`ZeroRedundancyOptimizer::new`] is key
    /// `0.j`. Errors when an inner optimizer has several parameter groups (their keys
    /// cannot be renumbered into one list), and on every rank when any rank's shard cannot
    /// be encoded.
    pub fn consolidated_state(&self) -> Result<OptimizerState> {
        const OP: &str = "ZeroRedundancyOptimizer::consolidated_state";
        let encoded = match &self.inner {
            None => Ok(Vec::new()),
            Some(inner) if inner.param_groups().len() != 1 => Err(distributed_error(
                OP,
                format!(
                    "rank {}'s optimizer has {} parameter groups; consolidation needs one",
                    self.comm.rank(),
                    inner.param_groups().len()
                ),
            )),
            Some(inner) => inner
                .state_dict()
                .and_then(|state| shard_checkpoint(state).to_bytes()),
        };
        // Every rank learns every length first, a failed rank sending -1, so that a failure
        // anywhere is an error everywhere instead of a wait in the next collective.
        let mut own = [encoded.as_ref().map_or(-1, |bytes| bytes.len() as i64)];
        let mut lengths = vec![0i64; self.comm.world_size()];
        let ones = vec![1; self.comm.world_size()];
        self.comm
            .all_gather(Elements::I64(&mut own), Elements::I64(&mut lengths), &ones)?;
        let mut local = encoded?;
        if let Some(failed) = lengths.iter().position(|&n| n < 0) {
            return Err(distributed_error(
                OP,
                format!("rank {failed} could not encode its optimizer shard"),
            ));
        }
        let counts: Vec<usize> = lengths.iter().map(|&n| n as usize).collect();
        let mut gathered = vec![0u8; counts.iter().sum()];
        self.comm.all_gather(
            Elements::U8(&mut local),
            Elements::U8(&mut gathered),
            &counts,
        )?;
        let mut whole = OptimizerState::default();
        let mut offset = 0;
        for (rank, &length) in counts.iter().enumerate() {
            let bytes = &gathered[offset..offset + length];
            offset += length;
            if length == 0 {
                continue;
            }
            let shard =
                Checkpoint::from_bytes(bytes, &format!("rank {rank}'s optimizer shard"))?.optimizer;
            if whole.lrs.is_empty() {
                whole.lrs = shard.lrs.clone();
            } else if whole.lrs != shard.lrs {
                return Err(distributed_error(
                    OP,
                    format!(
                        "rank {rank}'s learning rates {:?} differ from rank 0's {:?}; set rates \
                         on every rank alike",
                        shard.lrs, whole.lrs
                    ),
                ));
            }
            let first = self.bounds[rank];
            let global = |key: &str| {
                renumber(key, |local| Some(local + first)).ok_or_else(|| {
                    distributed_error(OP, format!("rank {rank}'s shard has a key `{key}`"))
                })
            };
            for (key, count) in shard.steps {
                whole.steps.push((global(&key)?, count));
            }
            for (key, buffer) in shard.buffers {
                whole.buffers.push((global(&key)?, buffer));
            }
        }
        Ok(whole)
    }

    /// Takes this rank's shard out of a consolidated state (one group, key `0.j` for
    /// parameter `j`, as [`ZeroRedundancyOptimizer::consolidated_state`] or a plain
    /// optimizer over the same parameter list writes it). Every rank calls it with the
    /// same state; no communication. Everything is checked before anything changes.
    pub fn load_consolidated_state(&mut self, state: &OptimizerState) -> Result<()> {
        let error = |message: String| {
            distributed_error("ZeroRedundancyOptimizer::load_consolidated_state", message)
        };
        if state.lrs.len() != 1 {
            return Err(error(format!(
                "the state has {} parameter groups; a sharded optimizer holds one",
                state.lrs.len()
            )));
        }
        let n = self.params.len();
        let index = |key: &str| {
            let j = parse_key(key).map(|(j, _)| j);
            j.filter(|&j| j < n).ok_or_else(|| {
                error(format!(
                    "the state names parameter `{key}`, but the optimizer has {n} parameters \
                     (keys 0.0 to 0.{}); was it written for another model?",
                    n.saturating_sub(1)
                ))
            })
        };
        let mut counted = vec![false; n];
        for (key, _) in &state.steps {
            let j = index(key)?;
            if std::mem::replace(&mut counted[j], true) {
                return Err(error(format!("the state counts parameter `{key}` twice")));
            }
        }
        if let Some(j) = counted.iter().position(|&seen| !seen) {
            return Err(error(format!(
                "the state has no step count for parameter 0.{j}; was it written for another \
                 model?"
            )));
        }
        for (key, buffer) in &state.buffers {
            let param = &self.params[index(key)?];
            if buffer.dims() != param.dims() || buffer.dtype() != param.dtype() {
                return Err(error(format!(
                    "optimizer buffer `{key}` is {:?} {} but its parameter is {:?} {}",
                    buffer.dims(),
                    buffer.dtype(),
                    param.dims(),
                    param.dtype()
                )));
            }
        }
        let (start, end) = (
            self.bounds[self.comm.rank()],
            self.bounds[self.comm.rank() + 1],
        );
        let local = |key: &str| {
            renumber(key, |global| {
                (start..end).contains(&global).then(|| global - start)
            })
        };
        let shard = OptimizerState {
            lrs: state.lrs.clone(),
            steps: (state.steps.iter())
                .filter_map(|(key, count)| Some((local(key)?, *count)))
                .collect(),
            buffers: (state.buffers.iter())
                .filter_map(|(key, buffer)| Some((local(key)?, buffer.clone())))
                .collect(),
        };
        match self.inner.as_mut() {
            Some(inner) => inner.load_state_dict(&shard),
            None => Ok(()),
        }
    }

    /// A checkpoint of `model` and the consolidated optimizer state (a collective; every
    /// rank receives the same checkpoint, which
    /// [`save_checkpoint`](super::save_checkpoint) then writes from rank 0).
    pub fn capture(
        &self,
        model: &dyn Module,
        scheduler_epoch: Option<u64>,
        epoch: u64,
        step: u64,
    ) -> Result<Checkpoint> {
        Checkpoint::with_optimizer_state(
            model,
            self.consolidated_state()?,
            scheduler_epoch,
            epoch,
            step,
        )
    }

    /// [`Checkpoint::restore`] for a sharded optimizer: loads the model, this rank's shard
    /// of the optimizer state and the generator, on any world size. On an error nothing has
    /// changed.
    pub fn restore(&mut self, checkpoint: &Checkpoint, model: &dyn Module) -> Result<()> {
        checkpoint.restore_with(model, |state| self.load_consolidated_state(state))
    }
}

/// A checkpoint holding only an optimizer shard: the encoding the shards travel in.
fn shard_checkpoint(state: OptimizerState) -> Checkpoint {
    Checkpoint {
        model: Vec::new(),
        optimizer: state,
        scheduler_epoch: None,
        rng: global_state(),
        epoch: 0,
        step: 0,
        metadata: Default::default(),
        loop_state: Default::default(),
        source: None,
    }
}

/// The parameter index and the buffer name of a group-0 key (`0.j` or `0.j.buffer`).
fn parse_key(key: &str) -> Option<(usize, Option<&str>)> {
    let rest = key.strip_prefix("0.")?;
    let (index, buffer) = match rest.split_once('.') {
        Some((index, buffer)) => (index, Some(buffer)),
        None => (rest, None),
    };
    if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((index.parse().ok()?, buffer))
}

/// Rewrites the parameter index of a group-0 key with `map`; `None` when the key has
/// another form or `map` declines it.
fn renumber(key: &str, map: impl FnOnce(usize) -> Option<usize>) -> Option<String> {
    let (index, buffer) = parse_key(key)?;
    let mapped = map(index)?;
    Some(match buffer {
        Some(buffer) => format!("0.{mapped}.{buffer}"),
        None => format!("0.{mapped}"),
    })
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
