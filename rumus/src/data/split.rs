//! [`random_split`]: a dataset cut into disjoint random [`Subset`]s (train / validation /
//! test), with PyTorch's rules (`torch.utils.data.random_split`) for the sizes, so a split
//! written for PyTorch asks for the same number of items here.
//!
//! The order comes from rumus's own generator, so a seed gives the same split on every run and
//! machine, but not the same items PyTorch's generator would pick.

use std::sync::Arc;

use super::dataset::{Dataset, index_error};
use crate::error::{Error, Result};
use crate::rng::Generator;

/// The items of a dataset at some of its indices, in the order given. The dataset is shared
/// (`Arc`), so the subsets of one split hold one copy of it.
pub struct Subset<D> {
    dataset: Arc<D>,
    indices: Vec<usize>,
}

impl<D: Dataset> Subset<D> {
    /// The items of `dataset` at `indices`; an index past its end is an error (found here,
    /// not at the first `get` in a training loop).
    pub fn new(dataset: Arc<D>, indices: Vec<usize>) -> Result<Self> {
        let len = dataset.len();
        if let Some(&bad) = indices.iter().find(|&&i| i >= len) {
            return Err(index_error("Subset::new", bad, len));
        }
        Ok(Subset { dataset, indices })
    }

    /// The indices into the whole dataset, in this subset's order.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }

    /// The whole dataset the subset draws from.
    pub fn dataset(&self) -> &Arc<D> {
        &self.dataset
    }
}

impl<D> Clone for Subset<D> {
    fn clone(&self) -> Self {
        Subset {
            dataset: Arc::clone(&self.dataset),
            indices: self.indices.clone(),
        }
    }
}

impl<D: Dataset> Dataset for Subset<D> {
    type Item = D::Item;

    fn len(&self) -> usize {
        self.indices.len()
    }

    fn get(&self, index: usize) -> Result<D::Item> {
        self.dataset.get(self.index(index)?)
    }

    /// Forwards the loader's generator, so augmentations of the whole dataset stay random.
    fn get_with(&self, index: usize, rng: &mut Generator) -> Result<D::Item> {
        self.dataset.get_with(self.index(index)?, rng)
    }
}

impl<D> Subset<D> {
    fn index(&self, index: usize) -> Result<usize> {
        self.indices
            .get(index)
            .copied()
            .ok_or_else(|| index_error("Subset::get", index, self.indices.len()))
    }
}

/// How to cut a dataset: item counts that add up to its length, or fractions that add up to 1.
/// Arrays, slices and vectors of `usize` or `f64` convert into it, so
/// `random_split(data, [800, 200], seed)` and `random_split(data, [0.8, 0.2], seed)` both read.
#[derive(Debug, Clone, PartialEq)]
pub enum SplitSizes {
    /// Items in each split; they must add up to the dataset's length.
    Counts(Vec<usize>),
    /// Share of the dataset in each split, each in `[0, 1]`, together 1.
    Fractions(Vec<f64>),
}

impl From<Vec<usize>> for SplitSizes {
    fn from(counts: Vec<usize>) -> Self {
        SplitSizes::Counts(counts)
    }
}

impl From<&[usize]> for SplitSizes {
    fn from(counts: &[usize]) -> Self {
        SplitSizes::Counts(counts.to_vec())
    }
}

impl<const N: usize> From<[usize; N]> for SplitSizes {
    fn from(counts: [usize; N]) -> Self {
        SplitSizes::Counts(counts.to_vec())
    }
}

impl From<Vec<f64>> for SplitSizes {
    fn from(fractions: Vec<f64>) -> Self {
        SplitSizes::Fractions(fractions)
    }
}

impl From<&[f64]> for SplitSizes {
    fn from(fractions: &[f64]) -> Self {
        SplitSizes::Fractions(fractions.to_vec())
    }
}

impl<const N: usize> From<[f64; N]> for SplitSizes {
    fn from(fractions: [f64; N]) -> Self {
        SplitSizes::Fractions(fractions.to_vec())
    }
}

fn split_error(message: String) -> Error {
    Error::InvalidArgument {
        op: "random_split",
        message,
    }
}

/// Python's `math.isclose(sum, 1)` at its default relative tolerance, which PyTorch uses to
/// tell fractions from counts.
fn sums_to_one(sum: f64) -> bool {
    (sum - 1.0).abs() <= 1e-9 * sum.abs().max(1.0)
}

/// The item count of each split of a dataset of `len` items.
///
/// Fractions follow PyTorch: split `i` gets `floor(len * fraction[i])` items, and the items
/// those floors leave over go one each to splits 0, 1, 2, ... in turn (round-robin). Ten
/// items cut `[0.33, 0.33, 0.34]` are floors `[3, 3, 3]` plus one left over: `[4, 3, 3]`.
pub fn split_lengths(len: usize, sizes: &SplitSizes) -> Result<Vec<usize>> {
    match sizes {
        SplitSizes::Counts(counts) => {
            if counts.is_empty() {
                return Err(split_error("needs at least one split size".into()));
            }
            let total = counts
                .iter()
                .try_fold(0usize, |acc, &c| acc.checked_add(c))
                .unwrap_or(usize::MAX);
            if total != len {
                return Err(split_error(format!(
                    "the sizes {counts:?} add up to {total} but the dataset holds {len} items; \
                     make them add up to {len}, or pass fractions such as [0.8, 0.2]"
                )));
            }
            Ok(counts.clone())
        }
        SplitSizes::Fractions(fractions) => {
            if fractions.is_empty() {
                return Err(split_error("needs at least one split fraction".into()));
            }
            if let Some((i, f)) = fractions
                .iter()
                .enumerate()
                .find(|(_, f)| !(0.0..=1.0).contains(*f))
            {
                return Err(split_error(format!(
                    "fraction {i} is {f}; every fraction must lie in [0, 1]"
                )));
            }
            let sum: f64 = fractions.iter().sum();
            if !sums_to_one(sum) || sum > 1.0 {
                return Err(split_error(format!(
                    "the fractions {fractions:?} add up to {sum}, not 1; give each split its \
                     share so that they add up to 1 (or pass item counts)"
                )));
            }
            let mut lengths: Vec<usize> = fractions
                .iter()
                .map(|f| (len as f64 * f).floor() as usize)
                .collect();
            let floored = lengths
                .iter()
                .try_fold(0usize, |acc, &l| acc.checked_add(l))
                .filter(|&total| total <= len)
                .ok_or_else(|| {
                    split_error(format!(
                        "the fractions {fractions:?} of {len} items round to more than {len}"
                    ))
                })?;
            let splits = lengths.len();
            for i in 0..len - floored {
                lengths[i % splits] += 1;
            }
            Ok(lengths)
        }
    }
}

/// Cuts `dataset` into disjoint subsets of the given sizes (counts or fractions, see
/// [`split_lengths`]) whose items are a random permutation of all its items, drawn from a
/// generator seeded with `seed`: the same seed gives the same split.
///
/// ```
/// use rumus::data::{Dataset, InMemory, random_split};
///
/// # fn main() -> rumus::Result<()> {
/// let data = InMemory::new((0..10).collect::<Vec<u32>>());
/// let parts = random_split(data, [0.8, 0.2], 42)?;
/// assert_eq!((parts[0].len(), parts[1].len()), (8, 2));
/// # Ok(())
/// # }
/// ```
pub fn random_split<D: Dataset>(
    dataset: D,
    sizes: impl Into<SplitSizes>,
    seed: u64,
) -> Result<Vec<Subset<D>>> {
    let len = dataset.len();
    let lengths = split_lengths(len, &sizes.into())?;
    let order = Generator::new(seed).permutation(len);
    let dataset = Arc::new(dataset);
    let mut start = 0;
    Ok(lengths
        .into_iter()
        .map(|length| {
            let indices = order[start..start + length].to_vec();
            start += length;
            Subset {
                dataset: Arc::clone(&dataset),
                indices,
            }
        })
        .collect())
}
