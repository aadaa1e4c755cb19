//! The settings the latest sharded epoch of this process was drawn with.
//!
//! [`DataLoader::shard`](super::DataLoader::shard) gives each rank a disjoint slice of every
//! global batch only if every rank draws the same epoch order: the same dataset length, the
//! same global batch, the same shuffle seed. Nothing in the loader itself can see the other
//! ranks, so each sharded epoch leaves its settings here, and the distributed collectives
//! send them with the fingerprint every rank compares before moving data: ranks that shard
//! with different seeds fail at their next collective with an error naming both seeds,
//! instead of training on overlapping slices.

use std::sync::Mutex;

/// What decides a sharded epoch's order (the rank, which picks the slice, is left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardOrder {
    /// Items in the dataset.
    pub items: usize,
    /// Items per global batch (the per-rank batch times the world size).
    pub global_batch: usize,
    /// The shuffle seed, or `None` when the loader does not shuffle.
    pub seed: Option<u64>,
    /// The epoch number, which seeds the permutation with the seed.
    pub epoch: u64,
}

static LATEST: Mutex<Option<ShardOrder>> = Mutex::new(None);

/// Remembers `order` as the latest sharded epoch drawn in this process.
pub(crate) fn record(order: ShardOrder) {
    *LATEST.lock().unwrap_or_else(|p| p.into_inner()) = Some(order);
}

/// The latest sharded epoch drawn in this process, if any was.
pub fn latest() -> Option<ShardOrder> {
    *LATEST.lock().unwrap_or_else(|p| p.into_inner())
}
