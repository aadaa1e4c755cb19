//! The optimizer a [`Trainer`](super::Trainer) lends to the step closure: the run's own,
//! behind gradient accumulation and clipping, so both are trainer options while the step
//! stays `optimizer.step(&mut loss.backward()?)`.

use crate::autograd::GradientStore;
use crate::error::Result;
use crate::optim::{Optimizer, OptimizerState, Params, clip_grad_norm};
use crate::tensor::DynTensor;

/// Sums the gradients of `accumulate` step calls, averages them (the gradient of the mean
/// loss over those batches, for batches of equal size), clips their joint norm to `clip`,
/// then steps the run's optimizer once.
pub(super) struct LentOptimizer<'a> {
    inner: &'a mut dyn Optimizer,
    accumulate: usize,
    clip: Option<f64>,
    pending: GradientStore,
    calls: usize,
}

impl<'a> LentOptimizer<'a> {
    pub(super) fn new(inner: &'a mut dyn Optimizer, accumulate: usize, clip: Option<f64>) -> Self {
        LentOptimizer {
            inner,
            accumulate,
            clip,
            pending: GradientStore::new(),
            calls: 0,
        }
    }

    /// Whether gradients wait for a step (mid-accumulation).
    pub(super) fn has_pending(&self) -> bool {
        self.calls > 0
    }

    /// Steps with what has accumulated so far (the end of an epoch whose batch count is not
    /// a multiple of the accumulation), averaged over the calls it came from.
    pub(super) fn flush(&mut self) -> Result<()> {
        if self.calls == 0 {
            return Ok(());
        }
        let mut grads = std::mem::take(&mut self.pending);
        let calls = std::mem::take(&mut self.calls);
        if calls > 1 {
            let params = self.parameters();
            for p in &params {
                if let (Some(id), Some(g)) = (p.id(), grads.remove(p)) {
                    grads.accumulate(id, g.mul_scalar(1.0 / calls as f64)?)?;
                }
            }
        }
        self.clip_and_step(&mut grads)
    }

    fn clip_and_step(&mut self, grads: &mut GradientStore) -> Result<()> {
        if let Some(max_norm) = self.clip {
            clip_grad_norm(grads, &self.parameters(), max_norm)?;
        }
        self.inner.step(grads)
    }

    fn parameters(&self) -> Vec<DynTensor> {
        let groups = &self.inner.params().groups;
        groups
            .iter()
            .flat_map(|g| g.params.iter().cloned())
            .collect()
    }
}

impl Optimizer for LentOptimizer<'_> {
    /// Adds `grads` to the accumulation; every `accumulate`-th call steps. The gradients
    /// stay in `grads`, as any optimizer's step leaves them.
    fn step(&mut self, grads: &mut GradientStore) -> Result<()> {
        if self.accumulate == 1 && self.clip.is_none() {
            return self.inner.step(grads);
        }
        let _no_grad = crate::no_grad();
        self.pending.merge(grads.clone())?;
        self.calls += 1;
        if self.calls == self.accumulate {
            self.flush()?;
        }
        Ok(())
    }

    fn params(&self) -> &Params {
        self.inner.params()
    }

    fn params_mut(&mut self) -> &mut Params {
        self.inner.params_mut()
    }

    fn state_dict(&self) -> Result<OptimizerState> {
        self.inner.state_dict()
    }

    fn load_state_dict(&mut self, state: &OptimizerState) -> Result<()> {
        self.inner.load_state_dict(state)
    }
}
