//! [`DataLoader`]: batches from a [`Dataset`], optionally shuffled, loaded by worker threads.
//!
//! Order and content depend only on the seed and the epoch, never on the number of workers:
//! the permutation of an epoch comes from a generator seeded with `(seed, epoch)`, each item's
//! random transforms from one seeded with `(seed, epoch, index)`, and batches are handed out
//! in order whatever order the workers finish them in.
//!
//! Workers take the next batch number from a shared counter, but never more than `prefetch`
//! batches ahead of the consumer, so memory stays bounded when training is slower than
//! loading. Dropping an [`Epoch`] mid-way tells the workers to stop and joins them: each
//! finishes at most the batch it is loading.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::dataset::{Dataset, item_seed};
use super::sample::Collate;
use super::shard_order::{self, ShardOrder};
use crate::error::{Error, Result};
use crate::rng::Generator;

/// Batches of a dataset, epoch after epoch.
///
/// ```
/// use rumus::data::{DataLoader, Features, InMemory, Sample};
///
/// # fn main() -> rumus::Result<()> {
/// // Ten items: item i is the vector [i, i], labelled i % 3.
/// let items: Vec<Sample> = (0..10)
///     .map(|i| Sample::classified(Features::vector(vec![i as f32; 2]), i % 3))
///     .collect();
/// let mut loader = DataLoader::new(InMemory::new(items.clone()), 4)?;
/// assert_eq!(loader.len(), 3); // 4 + 4 + 2
/// let batches = loader.epoch().collect::<rumus::Result<Vec<_>>>()?;
/// assert_eq!(batches[0].input.dims(), &[4, 2]);
/// assert_eq!(batches[2].target.to_vec::<i64>()?, vec![8 % 3, 9 % 3]);
///
/// // Shuffled: every item once per epoch, in an order that depends only on the seed and
/// // the epoch, so two worker threads give the batches one thread gives.
/// let order = |workers: usize| -> rumus::Result<Vec<f32>> {
///     let mut loader = DataLoader::new(InMemory::new(items.clone()), 4)?
///         .shuffle(7)
///         .workers(workers);
///     let mut firsts = Vec::new();
///     for batch in loader.epoch() {
///         firsts.extend(batch?.input.to_vec::<f32>()?.into_iter().step_by(2));
///     }
///     Ok(firsts)
/// };
/// let shuffled = order(0)?;
/// assert_eq!(order(2)?, shuffled);
/// let mut sorted = shuffled.clone();
/// sorted.sort_by(f32::total_cmp);
/// assert_eq!(sorted, (0..10).map(|i| i as f32).collect::<Vec<_>>());
/// # Ok(())
/// # }
/// ```
pub struct DataLoader<D: Dataset> {
    dataset: Arc<D>,
    batch_size: usize,
    shuffle: bool,
    drop_last: bool,
    seed: u64,
    workers: usize,
    prefetch: usize,
    next_epoch: u64,
    /// This process's rank and the number of ranks, when each rank loads its own slice.
    shard: Option<(usize, usize)>,
}

impl<D: Dataset> DataLoader<D>
where
    D::Item: Collate,
    D: 'static,
{
    /// A loader of batches of `batch_size` items in dataset order, on the calling thread.
    pub fn new(dataset: D, batch_size: usize) -> Result<Self> {
        if batch_size == 0 {
            return Err(Error::InvalidArgument {
                op: "DataLoader::new",
                message: "batch_size must be at least 1".into(),
            });
        }
        Ok(DataLoader {
            dataset: Arc::new(dataset),
            batch_size,
            shuffle: false,
            drop_last: false,
            seed: 0,
            workers: 0,
            prefetch: 2,
            next_epoch: 0,
            shard: None,
        })
    }

    /// Shuffles every epoch with a permutation drawn from `seed` and the epoch number.
    pub fn shuffle(mut self, seed: u64) -> Self {
        self.shuffle = true;
        self.seed = seed;
        self
    }

    /// Seeds the per-item generators of random transforms without shuffling.
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Leaves out the last batch when it would be smaller than `batch_size`.
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Loads on `workers` threads (0: on the calling thread, when asked for).
    pub fn workers(mut self, workers: usize) -> Self {
        self.workers = workers;
        self
    }

    /// How many batches workers may load ahead of the consumer, per worker (at least 1).
    pub fn prefetch(mut self, batches_per_worker: usize) -> Self {
        self.prefetch = batches_per_worker.max(1);
        self
    }

    /// Loads only rank `rank`'s slice of every batch, for data-parallel training over
    /// `world_size` processes: `batch_size` becomes the per-rank size, and global batch `k`
    /// is batch `k` of a single process with `batch_size * world_size` items, cut into
    /// consecutive slices in rank order. Every rank draws the same seeded epoch order, so
    /// the ranks' slices are disjoint and together hold each item once per epoch.
    ///
    /// A last global batch smaller than `batch_size * world_size` is split as evenly as
    /// possible (slices differ by at most one item); with fewer items than ranks it is
    /// left out on every rank, since every rank must take part in each step. With
    /// `drop_last` it is always left out.
    pub fn shard(mut self, rank: usize, world_size: usize) -> Result<Self> {
        if rank >= world_size {
            return Err(Error::InvalidArgument {
                op: "DataLoader::shard",
                message: format!("rank {rank} does not exist among {world_size} ranks"),
            });
        }
        self.shard = Some((rank, world_size));
        Ok(self)
    }

    /// The dataset the batches are drawn from.
    pub fn dataset(&self) -> &D {
        &self.dataset
    }

    /// Batches per epoch (on each rank, when sharded).
    pub fn len(&self) -> usize {
        let n = self.dataset.len();
        let (batch, ranks) = self.global_batch();
        let tail = n % batch;
        if self.drop_last || tail < ranks {
            n / batch
        } else {
            n / batch + 1
        }
    }

    /// Items per global batch, and the number of ranks sharing each.
    fn global_batch(&self) -> (usize, usize) {
        let ranks = self.shard.map_or(1, |(_, world)| world);
        (self.batch_size.saturating_mul(ranks), ranks)
    }

    /// Whether an epoch yields no batch (on this rank, when sharded).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The epoch the next [`DataLoader::epoch`] call starts.
    pub fn next_epoch(&self) -> u64 {
        self.next_epoch
    }

    /// The batches of the next epoch (0, 1, 2, ... on successive calls).
    pub fn epoch(&mut self) -> Epoch<D> {
        let epoch = self.next_epoch;
        self.next_epoch += 1;
        self.epoch_from(epoch, 0)
    }

    /// The batches of `epoch` starting at batch `first_batch`: how a resumed run continues
    /// exactly where a checkpoint left off. Later [`DataLoader::epoch`] calls continue from
    /// `epoch + 1`.
    pub fn epoch_from(&mut self, epoch: u64, first_batch: usize) -> Epoch<D> {
        self.next_epoch = epoch + 1;
        let plan = Arc::new(self.plan(epoch, first_batch));
        Epoch::start(Arc::clone(&self.dataset), plan, self.workers, self.prefetch)
    }

    /// What decides `epoch`'s order on every rank (sharded or not).
    pub(crate) fn shard_order(&self, epoch: u64) -> ShardOrder {
        ShardOrder {
            items: self.dataset.len(),
            global_batch: self.global_batch().0,
            seed: self.shuffle.then_some(self.seed),
            epoch,
        }
    }

    /// The index order of `epoch`, cut into batches.
    fn plan(&self, epoch: u64, first_batch: usize) -> Plan {
        let n = self.dataset.len();
        let order = if self.shuffle {
            Generator::new(item_seed(self.seed, epoch, usize::MAX)).permutation(n)
        } else {
            (0..n).collect()
        };
        let (batch, ranks) = self.global_batch();
        let rank = self.shard.map_or(0, |(rank, _)| rank);
        if self.shard.is_some() {
            shard_order::record(self.shard_order(epoch));
        }
        let batches = (0..self.len())
            .skip(first_batch)
            .map(|b| {
                let global = &order[b * batch..((b + 1) * batch).min(n)];
                // Rank r's slice: [r * len / ranks, (r + 1) * len / ranks).
                let (start, end) = (
                    rank * global.len() / ranks,
                    (rank + 1) * global.len() / ranks,
                );
                global[start..end].to_vec()
            })
            .collect();
        Plan {
            batches,
            first_batch,
            seed: self.seed,
            epoch,
        }
    }
}

/// Which items make up each batch of one epoch.
struct Plan {
    batches: Vec<Vec<usize>>,
    first_batch: usize,
    seed: u64,
    epoch: u64,
}

/// Loads batch `b` of `plan`: every item with its own seeded generator, then collation.
/// A panic in user code (a transform) becomes an error for this batch instead of a hung
/// loader.
fn load_batch<D: Dataset>(dataset: &D, plan: &Plan, b: usize) -> Result<BatchOf<D>>
where
    D::Item: Collate,
{
    let load = || {
        let items = plan.batches[b]
            .iter()
            .map(|&index| {
                let mut rng = Generator::new(item_seed(plan.seed, plan.epoch, index));
                dataset.get_with(index, &mut rng)
            })
            .collect::<Result<Vec<_>>>()?;
        D::Item::collate(items)
    };
    catch_unwind(AssertUnwindSafe(load)).unwrap_or_else(|panic| {
        let what = crate::error::panic_message(&*panic);
        Err(Error::InvalidArgument {
            op: "DataLoader",
            message: format!(
                "loading batch {} of epoch {} panicked: {what}",
                plan.first_batch + b,
                plan.epoch
            ),
        })
    })
}

/// The batch type a dataset's items collate into.
type BatchOf<D> = <<D as Dataset>::Item as Collate>::Batch;

/// A loaded batch with its number in the plan, as workers send it.
type Numbered<D> = (usize, Result<BatchOf<D>>);

/// What the consumer and the workers share.
struct Schedule {
    /// Next batch a worker may take.
    next: usize,
    /// Batches the consumer has received.
    consumed: usize,
    /// Set when the epoch is dropped.
    stop: bool,
    /// Workers waiting for the consumer to catch up.
    blocked: usize,
}

struct Shared {
    schedule: Mutex<Schedule>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Schedule> {
        self.schedule.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One epoch's batches, in order. Dropping it stops and joins its workers.
pub struct Epoch<D: Dataset>
where
    D::Item: Collate,
{
    dataset: Arc<D>,
    plan: Arc<Plan>,
    /// Next batch (relative to the plan) to hand out.
    position: usize,
    workers: Vec<JoinHandle<()>>,
    shared: Arc<Shared>,
    results: Option<Receiver<Numbered<D>>>,
    /// Batches that arrived before their turn.
    waiting: BTreeMap<usize, Result<BatchOf<D>>>,
}

impl<D: Dataset + 'static> Epoch<D>
where
    D::Item: Collate,
{
    fn start(dataset: Arc<D>, plan: Arc<Plan>, workers: usize, prefetch: usize) -> Self {
        let shared = Arc::new(Shared {
            schedule: Mutex::new(Schedule {
                next: 0,
                consumed: 0,
                stop: false,
                blocked: 0,
            }),
            wake: Condvar::new(),
        });
        let mut epoch = Epoch {
            dataset,
            plan,
            position: 0,
            workers: Vec::new(),
            shared,
            results: None,
            waiting: BTreeMap::new(),
        };
        if workers > 0 {
            let (sender, receiver) = channel();
            let ahead = workers * prefetch;
            epoch.workers = (0..workers)
                .map(|_| {
                    let job = Worker {
                        dataset: Arc::clone(&epoch.dataset),
                        plan: Arc::clone(&epoch.plan),
                        shared: Arc::clone(&epoch.shared),
                        results: sender.clone(),
                        ahead,
                    };
                    std::thread::spawn(move || job.run())
                })
                .collect();
            epoch.results = Some(receiver);
        }
        epoch
    }

    /// Batches left in this epoch.
    pub fn remaining(&self) -> usize {
        self.plan.batches.len() - self.position
    }

    /// The number (within the epoch) of the batch the next call to `next` returns.
    pub fn next_batch_number(&self) -> usize {
        self.plan.first_batch + self.position
    }

    fn receive(&mut self, b: usize) -> Result<BatchOf<D>> {
        let Some(receiver) = &self.results else {
            return load_batch(&*self.dataset, &self.plan, b);
        };
        loop {
            if let Some(batch) = self.waiting.remove(&b) {
                return batch;
            }
            match receiver.recv() {
                Ok((k, batch)) => {
                    self.waiting.insert(k, batch);
                }
                Err(_) => {
                    return Err(Error::InvalidArgument {
                        op: "DataLoader",
                        message: format!("the worker threads stopped before batch {b}"),
                    });
                }
            }
        }
    }
}

impl<D: Dataset + 'static> Iterator for Epoch<D>
where
    D::Item: Collate,
{
    type Item = Result<BatchOf<D>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.position >= self.plan.batches.len() {
            return None;
        }
        let batch = self.receive(self.position);
        self.position += 1;
        let mut schedule = self.shared.lock();
        schedule.consumed = self.position;
        // One batch was taken, so one more may be loaded: wake one waiting worker, and skip
        // the system call when none waits (the common case while workers keep up).
        if schedule.blocked > 0 {
            self.shared.wake.notify_one();
        }
        drop(schedule);
        Some(batch)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining(), Some(self.remaining()))
    }
}

impl<D: Dataset> Drop for Epoch<D>
where
    D::Item: Collate,
{
    fn drop(&mut self) {
        self.shared.lock().stop = true;
        self.shared.wake.notify_all();
        // Workers blocked on a full queue see `stop`; one loading a batch finishes it, finds
        // the receiver gone or `stop` set, and exits.
        self.results = None;
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

/// One loading thread.
struct Worker<D: Dataset>
where
    D::Item: Collate,
{
    dataset: Arc<D>,
    plan: Arc<Plan>,
    shared: Arc<Shared>,
    results: Sender<Numbered<D>>,
    /// How far past the consumer the workers may run.
    ahead: usize,
}

impl<D: Dataset> Worker<D>
where
    D::Item: Collate,
{
    fn run(self) {
        let total = self.plan.batches.len();
        loop {
            let b = {
                let mut schedule = self.shared.lock();
                while !schedule.stop
                    && schedule.next < total
                    && schedule.next >= schedule.consumed + self.ahead
                {
                    schedule.blocked += 1;
                    schedule = self
                        .shared
                        .wake
                        .wait(schedule)
                        .unwrap_or_else(|p| p.into_inner());
                    schedule.blocked -= 1;
                }
                if schedule.stop || schedule.next >= total {
                    return;
                }
                schedule.next += 1;
                schedule.next - 1
            };
            let batch = load_batch(&*self.dataset, &self.plan, b);
            if self.results.send((b, batch)).is_err() {
                return;
            }
        }
    }
}
