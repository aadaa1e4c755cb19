//! Dataset building blocks against independent truths: `random_split` against PyTorch's
//! documented size rule and set arithmetic.

use std::collections::BTreeSet;

use rumus::data::{Dataset, InMemory, SplitSizes, Subset, random_split, split_lengths};

// ---------------------------------------------------------------------------------------------
// random_split

/// Every item of a dataset of `0..n`, read through the subsets' `get`.
fn items(subset: &Subset<InMemory<usize>>) -> Vec<usize> {
    (0..subset.len()).map(|i| subset.get(i).unwrap()).collect()
}

#[test]
fn fractions_follow_pytorchs_remainder_rule() {
    // PyTorch: each split gets floor(len * fraction); what is left goes one item each to
    // splits 0, 1, ... in turn. 10 * 0.33 = 3.3 -> 3, 3.3 -> 3, 3.4 -> 3: one item left, to
    // split 0.
    let fractions = |f: &[f64]| SplitSizes::Fractions(f.to_vec());
    assert_eq!(
        split_lengths(10, &fractions(&[0.33, 0.33, 0.34])).unwrap(),
        [4, 3, 3]
    );
    // 11 quarters: floors 2, 2, 2, 2 leave 3, to splits 0, 1 and 2.
    assert_eq!(
        split_lengths(11, &fractions(&[0.25; 4])).unwrap(),
        [3, 3, 3, 2]
    );
    // 7 * 0.5 = 3.5 -> 3 twice; one left, to split 0.
    assert_eq!(split_lengths(7, &fractions(&[0.5, 0.5])).unwrap(), [4, 3]);
    // 5 * 0.1 = 0.5 -> 0, 5 * 0.9 = 4.5 -> 4; one left, to split 0.
    assert_eq!(split_lengths(5, &fractions(&[0.1, 0.9])).unwrap(), [1, 4]);
    assert_eq!(split_lengths(0, &fractions(&[0.5, 0.5])).unwrap(), [0, 0]);
    // A sum within Python's `math.isclose` of 1 counts as 1 (0.1 * 10 adds up to
    // 0.9999999999999999 in floating point): floors 1 each of 10.
    assert_eq!(split_lengths(10, &fractions(&[0.1; 10])).unwrap(), [1; 10]);
}

#[test]
fn bad_sizes_are_errors_that_say_what_to_do() {
    let err = |sizes: SplitSizes| split_lengths(10, &sizes).unwrap_err().to_string();
    let counts = err(SplitSizes::Counts(vec![3, 3, 3]));
    assert!(
        counts.contains("add up to 9") && counts.contains("holds 10"),
        "{counts}"
    );
    assert!(err(SplitSizes::Counts(vec![])).contains("at least one"));
    assert!(err(SplitSizes::Fractions(vec![])).contains("at least one"));
    let nan = err(SplitSizes::Fractions(vec![f64::NAN, 1.0]));
    assert!(nan.contains("fraction 0 is NaN"), "{nan}");
    let negative = err(SplitSizes::Fractions(vec![1.5, -0.5]));
    assert!(negative.contains("fraction 0 is 1.5"), "{negative}");
    let short = err(SplitSizes::Fractions(vec![0.5, 0.4]));
    assert!(
        short.contains("add up to 0.9") && short.contains("not 1"),
        "{short}"
    );
    let over = err(SplitSizes::Fractions(vec![0.6, 0.6]));
    assert!(over.contains("not 1"), "{over}");
    // Counts that overflow when added are an error too, not a wrapped sum.
    assert!(split_lengths(10, &SplitSizes::Counts(vec![usize::MAX, 11])).is_err());
    assert!(random_split(InMemory::new(vec![0u8; 4]), [1, 2], 0).is_err());
}

#[test]
fn splits_are_disjoint_cover_the_data_and_keep_their_sizes() {
    let data = InMemory::new((0..100).collect::<Vec<usize>>());
    let parts = random_split(data, [0.7, 0.2, 0.1], 7).unwrap();
    let sizes: Vec<usize> = parts.iter().map(Dataset::len).collect();
    assert_eq!(sizes, [70, 20, 10]);
    let mut seen = BTreeSet::new();
    for part in &parts {
        for item in items(part) {
            assert!(seen.insert(item), "item {item} is in two splits");
        }
    }
    assert_eq!(seen, (0..100).collect::<BTreeSet<usize>>());
    // Items are those of the whole dataset at the subset's indices.
    for part in &parts {
        let expected: Vec<usize> = part.indices().to_vec();
        assert_eq!(items(part), expected);
    }
    // A random permutation, not the first 70 in order.
    assert_ne!(items(&parts[0]), (0..70).collect::<Vec<usize>>());
    let past_end = parts[2].get(10).unwrap_err().to_string();
    assert!(past_end.contains("index 10"), "{past_end}");
}

#[test]
fn the_seed_alone_decides_the_split() {
    let split = |seed: u64| {
        let data = InMemory::new((0..50).collect::<Vec<usize>>());
        random_split(data, [40, 10], seed)
            .unwrap()
            .iter()
            .map(items)
            .collect::<Vec<_>>()
    };
    assert_eq!(split(3), split(3));
    assert_ne!(split(3), split(4));
    // Counts given as a vector or slice read the same as an array.
    let data = InMemory::new((0..50).collect::<Vec<usize>>());
    let from_vec = random_split(data, vec![40usize, 10], 3).unwrap();
    assert_eq!(from_vec.iter().map(items).collect::<Vec<_>>(), split(3));
}

#[test]
fn a_subset_checks_its_indices_and_shares_the_dataset() {
    let data = std::sync::Arc::new(InMemory::new(vec![10u32, 20, 30]));
    let subset = Subset::new(data.clone(), vec![2, 0]).unwrap();
    assert_eq!((subset.get(0).unwrap(), subset.get(1).unwrap()), (30, 10));
    assert!(std::sync::Arc::ptr_eq(subset.dataset(), &data));
    let err = Subset::new(data, vec![0, 3])
        .err()
        .expect("index 3 of 3 items")
        .to_string();
    assert!(err.contains("index 3") && err.contains("size 3"), "{err}");
}
