//! The data loader: order fixed by the seed for any number of workers, bounded prefetch,
//! prompt shutdown, errors delivered in order, and typed collation at the boundary.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use rumus::data::transform::{random_crop, random_horizontal_flip};
use rumus::data::{Batch, DataLoader, Dataset, Features, InMemory, Sample};
use rumus::rng::Generator;
use rumus::{D, Dyn, Error, Result};

/// `n` 4x4 one-channel images whose pixels encode their index, labelled `index % 10`.
fn images(n: usize) -> InMemory<Sample> {
    InMemory::new(
        (0..n)
            .map(|i| {
                let pixels = (0..16).map(|p| (i * 16 + p) as f32).collect();
                Sample::classified(Features::new(pixels, &[1, 4, 4]).unwrap(), (i % 10) as i64)
            })
            .collect(),
    )
}

/// Every batch of `epochs` epochs as raw values, with random crops and flips.
fn run(workers: usize, epochs: usize) -> Vec<(Vec<f32>, Vec<i64>)> {
    let augmented = images(103)
        .map_random(random_crop(4, 4, 1))
        .map_random(random_horizontal_flip(0.5));
    let mut loader = DataLoader::new(augmented, 8)
        .unwrap()
        .shuffle(42)
        .workers(workers)
        .prefetch(2);
    let mut out = Vec::new();
    for _ in 0..epochs {
        for batch in loader.epoch() {
            let batch = batch.unwrap();
            out.push((
                batch.input.to_vec::<f32>().unwrap(),
                batch.target.to_vec::<i64>().unwrap(),
            ));
        }
    }
    out
}

#[test]
fn order_and_augmentation_are_the_same_for_any_number_of_workers() {
    let reference = run(0, 2);
    assert_eq!(reference.len(), 2 * 103usize.div_ceil(8));
    for workers in [1, 2, 4] {
        assert!(
            run(workers, 2) == reference,
            "{workers} workers gave different batches than loading on the calling thread"
        );
    }
    // Shuffled: the two epochs see the labels in different orders.
    let labels = |epoch: usize| -> Vec<i64> {
        let per_epoch = reference.len() / 2;
        reference[epoch * per_epoch..(epoch + 1) * per_epoch]
            .iter()
            .flat_map(|(_, l)| l.clone())
            .collect()
    };
    assert_ne!(labels(0), labels(1));
}

#[test]
fn every_item_once_per_epoch_and_drop_last() {
    let mut loader = DataLoader::new(images(103), 10)
        .unwrap()
        .shuffle(7)
        .workers(2);
    let mut seen: Vec<usize> = loader
        .epoch()
        .flat_map(|b| {
            let pixels = b.unwrap().input.to_vec::<f32>().unwrap();
            pixels
                .chunks(16)
                .map(|image| image[0] as usize / 16)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_ne!(seen, (0..103).collect::<Vec<_>>(), "shuffled");
    seen.sort_unstable();
    assert_eq!(seen, (0..103).collect::<Vec<_>>());

    let mut dropping = DataLoader::new(images(103), 10).unwrap().drop_last(true);
    assert_eq!(dropping.len(), 10);
    let sizes: Vec<usize> = dropping.epoch().map(|b| b.unwrap().len()).collect();
    assert_eq!(sizes, vec![10; 10]);
    let mut keeping = DataLoader::new(images(103), 10).unwrap();
    assert_eq!(keeping.epoch().last().unwrap().unwrap().len(), 3);
}

#[test]
fn resuming_mid_epoch_continues_with_the_same_batches() {
    let mut loader = DataLoader::new(images(50), 4)
        .unwrap()
        .shuffle(3)
        .workers(2);
    let _ = loader.epoch();
    let full: Vec<Batch> = loader.epoch().map(|b| b.unwrap()).collect();
    let mut resumed = DataLoader::new(images(50), 4)
        .unwrap()
        .shuffle(3)
        .workers(1);
    let tail: Vec<Batch> = resumed.epoch_from(1, 5).map(|b| b.unwrap()).collect();
    assert_eq!(tail.len(), full.len() - 5);
    for (a, b) in full[5..].iter().zip(&tail) {
        assert_eq!(
            a.input.to_vec::<f32>().unwrap(),
            b.input.to_vec::<f32>().unwrap()
        );
    }
    assert_eq!(resumed.next_epoch(), 2);
}

/// Counts reads and sleeps in each, so workers are still busy when the consumer stops.
struct Slow {
    reads: Arc<AtomicUsize>,
}

/// Threads that have read from `Slow` and not exited yet.
static LIVE_READERS: AtomicUsize = AtomicUsize::new(0);

/// Registered once per reading thread; its destructor runs when the thread exits.
struct LiveReader;

impl Drop for LiveReader {
    fn drop(&mut self) {
        LIVE_READERS.fetch_sub(1, Ordering::SeqCst);
    }
}

thread_local! {
    static READER: LiveReader = {
        LIVE_READERS.fetch_add(1, Ordering::SeqCst);
        LiveReader
    };
}

impl Dataset for Slow {
    type Item = Sample;

    fn len(&self) -> usize {
        1000
    }

    fn get(&self, index: usize) -> Result<Sample> {
        READER.with(|_| ());
        self.reads.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2));
        Ok(Sample::classified(Features::vector(vec![index as f32]), 0))
    }
}

#[test]
fn dropping_mid_epoch_stops_and_joins_the_workers() {
    let reads = Arc::new(AtomicUsize::new(0));
    let (batch_size, workers, prefetch) = (4, 3, 2);
    let loader = DataLoader::new(
        Slow {
            reads: Arc::clone(&reads),
        },
        batch_size,
    )
    .unwrap()
    .workers(workers)
    .prefetch(prefetch);
    let (done, finished) = mpsc::channel();
    let watched = std::thread::spawn(move || {
        let mut loader = loader;
        let mut epoch = loader.epoch();
        let first = epoch.next().unwrap().unwrap();
        assert_eq!(
            first.input.to_vec::<f32>().unwrap(),
            vec![0.0, 1.0, 2.0, 3.0]
        );
        // Give the workers time to run ahead as far as they may.
        std::thread::sleep(Duration::from_millis(100));
        drop(epoch);
        done.send(loader).unwrap();
    });
    // A deadlock would never send; a generous limit turns it into a failure, not a hang.
    let loader = finished
        .recv_timeout(Duration::from_secs(60))
        .expect("dropping the epoch did not return: the loader deadlocked");
    watched.join().unwrap();
    // No worker outlives the epoch: every thread that read has exited.
    assert_eq!(
        LIVE_READERS.load(Ordering::SeqCst),
        0,
        "a worker thread is still alive after the epoch was dropped"
    );
    drop(loader);
    // Prefetch is bounded: one batch consumed, at most `workers * prefetch` queued or
    // finished ahead of it, and one more in flight per worker when the stop came.
    let bound = (1 + workers * prefetch + workers) * batch_size;
    let read = reads.load(Ordering::SeqCst);
    assert!(
        read <= bound,
        "{read} items read, more than the bound {bound}"
    );
    assert!(read < 1000);
}

/// Fails on one index and panics on another.
struct Faulty;

impl Dataset for Faulty {
    type Item = Sample;

    fn len(&self) -> usize {
        20
    }

    fn get(&self, index: usize) -> Result<Sample> {
        match index {
            9 => Err(Error::Format {
                path: "faulty".into(),
                message: "record 9 is corrupt".into(),
            }),
            14 => panic!("transform bug on item 14"),
            _ => Ok(Sample::classified(Features::vector(vec![index as f32]), 0)),
        }
    }
}

#[test]
fn errors_and_panics_arrive_in_order_and_the_epoch_goes_on() {
    for workers in [0, 2] {
        let mut loader = DataLoader::new(Faulty, 5).unwrap().workers(workers);
        let results: Vec<Result<Batch>> = loader.epoch().collect();
        assert_eq!(results.len(), 4);
        assert!(results[0].is_ok() && results[3].is_ok());
        let corrupt = results[1].as_ref().unwrap_err().to_string();
        assert!(corrupt.contains("record 9"), "{corrupt}");
        let panicked = results[2].as_ref().unwrap_err().to_string();
        assert!(
            panicked.contains("batch 2") && panicked.contains("item 14"),
            "{panicked}"
        );
    }
}

#[test]
fn batches_enter_typed_code_through_a_checked_boundary() {
    let mut loader = DataLoader::new(images(12), 5).unwrap();
    let batch = loader.epoch().next().unwrap().unwrap();
    let typed = batch.input::<(Dyn, D<1>, D<4>, D<4>)>().unwrap();
    assert_eq!(typed.dims(), &[5, 1, 4, 4]);
    let err = batch.input::<(Dyn, D<1>, D<5>, D<4>)>().unwrap_err();
    assert!(err.to_string().contains("axis 2"), "{err}");

    let ragged = InMemory::new(vec![
        Sample::classified(Features::vector(vec![0.0; 3]), 0),
        Sample::classified(Features::vector(vec![0.0; 4]), 1),
    ]);
    let mut loader = DataLoader::new(ragged, 2).unwrap();
    let err = loader.epoch().next().unwrap().unwrap_err().to_string();
    assert!(err.contains("item 1") && err.contains("[4]"), "{err}");
    assert!(DataLoader::new(images(1), 0).is_err());
}

#[test]
fn random_transforms_read_outside_a_loader_are_repeatable() {
    let augmented = images(5).map_random(random_crop(3, 3, 0));
    assert_eq!(augmented.get(2).unwrap(), augmented.get(2).unwrap());
    let mut rng = Generator::new(1);
    assert!(augmented.get_with(2, &mut rng).is_ok());
    assert!(augmented.get(5).is_err());
}

/// The item numbers of every batch of epoch 0 and 1 (the first pixel of an image is 16 x
/// its number).
fn item_numbers(loader: &mut DataLoader<InMemory<Sample>>) -> Vec<Vec<usize>> {
    (0..2)
        .flat_map(|_| loader.epoch().collect::<Vec<_>>())
        .map(|batch| {
            let pixels = batch.unwrap().input.to_vec::<f32>().unwrap();
            pixels.chunks(16).map(|p| p[0] as usize / 16).collect()
        })
        .collect()
}

#[test]
fn sharded_loaders_cut_each_global_batch_into_disjoint_rank_slices() {
    for (items, per_rank, world, drop_last) in [
        (103, 4, 2, false),
        (103, 4, 3, false),
        (103, 4, 4, true),
        (96, 8, 4, false),
        (101, 8, 4, false),
        (98, 4, 4, false),
    ] {
        let mut single = DataLoader::new(images(items), per_rank * world)
            .unwrap()
            .shuffle(5)
            .drop_last(drop_last);
        let expected = item_numbers(&mut single);
        let ranks: Vec<Vec<Vec<usize>>> = (0..world)
            .map(|rank| {
                let mut loader = DataLoader::new(images(items), per_rank)
                    .unwrap()
                    .shuffle(5)
                    .drop_last(drop_last)
                    .shard(rank, world)
                    .unwrap();
                let len = loader.len();
                let batches = item_numbers(&mut loader);
                assert_eq!(batches.len(), 2 * len);
                batches
            })
            .collect();
        let case = format!("{items} items, {per_rank} per rank, {world} ranks");
        assert!(
            ranks.iter().all(|r| r.len() == ranks[0].len()),
            "{case}: same step count"
        );
        let tail = items % (per_rank * world);
        let full = if !drop_last && tail > 0 && tail < world {
            // The single process keeps a tail the ranks cannot share: compare the rest.
            expected.len() / 2 - 1
        } else {
            expected.len() / 2
        };
        for epoch in 0..2 {
            for b in 0..full {
                let single = &expected[epoch * (expected.len() / 2) + b];
                let union: Vec<usize> = ranks
                    .iter()
                    .flat_map(|r| r[epoch * full + b].clone())
                    .collect();
                assert_eq!(
                    &union, single,
                    "{case}: epoch {epoch} batch {b} in rank order"
                );
                let sizes: Vec<usize> = ranks.iter().map(|r| r[epoch * full + b].len()).collect();
                assert!(
                    sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1,
                    "{case}: slices {sizes:?} as even as possible"
                );
            }
        }
    }
    let no_rank = DataLoader::new(images(4), 2).unwrap().shard(2, 2);
    assert!(matches!(no_rank, Err(Error::InvalidArgument { .. })));
}
