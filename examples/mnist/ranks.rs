//! One process, or one of the ranks of an `mpirun` job (`--distributed`).

use rumus::data::{DataLoader, Dataset};
use rumus::prelude::*;

#[cfg(feature = "distributed")]
use rumus::distributed::{Collective, DistributedDataParallel, Mpi};
#[cfg(feature = "distributed")]
use std::sync::Arc;

/// Where this process stands among the training processes.
pub struct Ranks {
    #[cfg(feature = "distributed")]
    comm: Option<Arc<dyn Collective>>,
    #[cfg(feature = "distributed")]
    ddp: Option<DistributedDataParallel>,
}

impl Ranks {
    /// One process, or (with `distributed`) the ranks `mpirun` started.
    pub fn new(distributed: bool) -> Result<Ranks, String> {
        #[cfg(feature = "distributed")]
        {
            let comm: Option<Arc<dyn Collective>> = if distributed {
                Some(Arc::new(Mpi::init().map_err(|e| e.to_string())?))
            } else {
                None
            };
            Ok(Ranks { comm, ddp: None })
        }
        #[cfg(not(feature = "distributed"))]
        if distributed {
            Err("--distributed needs a build with `--features distributed`".into())
        } else {
            Ok(Ranks {})
        }
    }

    pub fn world_size(&self) -> usize {
        #[cfg(feature = "distributed")]
        if let Some(comm) = &self.comm {
            return comm.world_size();
        }
        1
    }

    /// This process's share of a global batch of `batch` images: all of it alone, `batch / N`
    /// among N ranks, so that the job steps through the same batches as one process does
    /// (with the same learning rate). An error when the ranks cannot share it evenly.
    pub fn share_of_batch(&self, batch: usize) -> Result<usize, String> {
        let ranks = self.world_size();
        if batch == 0 || !batch.is_multiple_of(ranks) {
            return Err(format!(
                "--batch {batch} does not split evenly over {ranks} processes: the global \
                 batch must be a positive multiple of the process count, e.g. --batch {}",
                ranks * (batch / ranks).max(1)
            ));
        }
        Ok(batch / ranks)
    }

    /// Rank 0 (or the only process): the one that prints.
    pub fn is_main(&self) -> bool {
        #[cfg(feature = "distributed")]
        if let Some(comm) = &self.comm {
            return comm.rank() == 0;
        }
        true
    }

    /// Starts every rank from rank 0's parameters and averages gradients from then on.
    pub fn wrap(self, model: &dyn Module) -> rumus::Result<Ranks> {
        #[cfg(feature = "distributed")]
        if let Some(comm) = &self.comm {
            let ddp = DistributedDataParallel::new(comm.clone(), model)?;
            return Ok(Ranks {
                ddp: Some(ddp),
                ..self
            });
        }
        let _ = model;
        Ok(self)
    }

    /// This rank's slice of every batch.
    pub fn shard<D: Dataset + 'static>(&self, loader: DataLoader<D>) -> rumus::Result<DataLoader<D>>
    where
        D::Item: rumus::data::Collate,
    {
        #[cfg(feature = "distributed")]
        if let Some(comm) = &self.comm {
            return rumus::distributed::shard(loader, &**comm);
        }
        Ok(loader)
    }

    /// The gradients of `loss`, averaged over every rank.
    pub fn backward(&self, loss: &DynTensor) -> rumus::Result<GradientStore> {
        #[cfg(feature = "distributed")]
        if let Some(ddp) = &self.ddp {
            return ddp.backward(loss);
        }
        loss.backward()
    }
}
