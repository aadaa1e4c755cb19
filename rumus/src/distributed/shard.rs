//! [`shard`]: a data loader split across the ranks of a job, checked against every rank's.

use super::collective::Collective;
use crate::data::shard_order;
use crate::data::{Collate, DataLoader, Dataset};
use crate::error::Result;

/// `loader` sharded over `comm`'s ranks ([`DataLoader::shard`] with `comm`'s rank and
/// world size), after checking that every rank's loader draws the same epoch order: the
/// same number of items, batch size and shuffle seed. Ranks that differ fail here, on every
/// rank, with an error naming both settings, instead of training on slices that overlap.
///
/// Set the shuffle seed before calling this. (A loader sharded with [`DataLoader::shard`]
/// directly is checked too, at the first collective after each epoch starts.)
pub fn shard<D>(loader: DataLoader<D>, comm: &dyn Collective) -> Result<DataLoader<D>>
where
    D: Dataset + 'static,
    D::Item: Collate,
{
    let loader = loader.shard(comm.rank(), comm.world_size())?;
    shard_order::record(loader.shard_order(loader.next_epoch()));
    // A barrier's fingerprint carries the order just recorded.
    comm.barrier()?;
    Ok(loader)
}
