//! The [`Dataset`] trait and its combinators. A dataset is an indexable collection whose `get`
//! is fallible (items come from files that may be corrupt), and which is `Send + Sync` so the
//! [`DataLoader`](super::DataLoader)'s worker threads can share it.
//!
//! Randomness (augmentations) never comes from a shared generator: the loader hands each item
//! a generator seeded from `(seed, epoch, index)`, so an item is the same whichever worker
//! loads it, and a run is reproducible for any number of workers.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::rng::Generator;

/// An indexable, fallible collection of items.
pub trait Dataset: Send + Sync {
    /// What `get` returns (a [`Sample`](super::Sample), a record's bytes, ...).
    type Item: Send + 'static;

    /// Number of items.
    fn len(&self) -> usize;

    /// Whether the dataset holds no items.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Item `index` (`0..len()`); an index out of range is an error, as is a corrupt record.
    fn get(&self, index: usize) -> Result<Self::Item>;

    /// Item `index` with any randomness drawn from `rng`. The loader calls this with a
    /// generator seeded per item; datasets without random transforms need not override it.
    fn get_with(&self, index: usize, rng: &mut Generator) -> Result<Self::Item> {
        let _ = rng;
        self.get(index)
    }

    /// Applies `f` to every item (normalisation, one-hot labels, decoding records).
    fn map<F, Out>(self, f: F) -> Map<Self, F>
    where
        Self: Sized,
        F: Fn(Self::Item) -> Result<Out> + Send + Sync,
        Out: Send + 'static,
    {
        Map { inner: self, f }
    }

    /// Applies a random transform `f` (crop, flip) with the per-item generator.
    fn map_random<F, Out>(self, f: F) -> MapRandom<Self, F>
    where
        Self: Sized,
        F: Fn(Self::Item, &mut Generator) -> Result<Out> + Send + Sync,
        Out: Send + 'static,
    {
        MapRandom { inner: self, f }
    }
}

/// The error for an index past the end of a dataset.
pub fn index_error(op: &'static str, index: usize, len: usize) -> Error {
    Error::IndexOutOfRange {
        op,
        index: index as i64,
        axis: 0,
        size: len,
    }
}

/// Items held in memory.
#[derive(Debug, Clone)]
pub struct InMemory<T> {
    items: Vec<T>,
}

impl<T> InMemory<T> {
    /// A dataset of `items`, in order; `get` clones one out.
    pub fn new(items: Vec<T>) -> Self {
        InMemory { items }
    }

    /// The items, in index order.
    pub fn items(&self) -> &[T] {
        &self.items
    }
}

impl<T: Clone + Send + Sync + 'static> Dataset for InMemory<T> {
    type Item = T;

    fn len(&self) -> usize {
        self.items.len()
    }

    fn get(&self, index: usize) -> Result<T> {
        self.items
            .get(index)
            .cloned()
            .ok_or_else(|| index_error("InMemory::get", index, self.items.len()))
    }
}

/// A dataset shared between owners (e.g. the same data in two loaders).
impl<D: Dataset> Dataset for Arc<D> {
    type Item = D::Item;

    fn len(&self) -> usize {
        (**self).len()
    }

    fn get(&self, index: usize) -> Result<D::Item> {
        (**self).get(index)
    }

    fn get_with(&self, index: usize, rng: &mut Generator) -> Result<D::Item> {
        (**self).get_with(index, rng)
    }
}

/// See [`Dataset::map`].
pub struct Map<D, F> {
    inner: D,
    f: F,
}

impl<D, F, Out> Dataset for Map<D, F>
where
    D: Dataset,
    F: Fn(D::Item) -> Result<Out> + Send + Sync,
    Out: Send + 'static,
{
    type Item = Out;

    fn len(&self) -> usize {
        self.inner.len()
    }

    fn get(&self, index: usize) -> Result<Out> {
        (self.f)(self.inner.get(index)?)
    }

    fn get_with(&self, index: usize, rng: &mut Generator) -> Result<Out> {
        (self.f)(self.inner.get_with(index, rng)?)
    }
}

/// See [`Dataset::map_random`].
pub struct MapRandom<D, F> {
    inner: D,
    f: F,
}

/// The generator an item gets when it is read outside a loader (`get`): fixed per index, so
/// repeated reads agree.
fn standalone_generator(index: usize) -> Generator {
    Generator::new(item_seed(0, 0, index))
}

/// Seed of the generator for item `index` in `epoch` of a loader seeded with `seed`.
pub fn item_seed(seed: u64, epoch: u64, index: usize) -> u64 {
    let mut g = Generator::new(seed ^ epoch.rotate_left(32));
    g.next_u64() ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

impl<D, F, Out> Dataset for MapRandom<D, F>
where
    D: Dataset,
    F: Fn(D::Item, &mut Generator) -> Result<Out> + Send + Sync,
    Out: Send + 'static,
{
    type Item = Out;

    fn len(&self) -> usize {
        self.inner.len()
    }

    fn get(&self, index: usize) -> Result<Out> {
        self.get_with(index, &mut standalone_generator(index))
    }

    fn get_with(&self, index: usize, rng: &mut Generator) -> Result<Out> {
        let item = self.inner.get_with(index, rng)?;
        (self.f)(item, rng)
    }
}
