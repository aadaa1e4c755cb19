//! Training checkpoints: exact round trips, damaged files that are errors and never panics,
//! restores that change nothing on a mismatch, rolling directories, a resumed run that equals
//! the uninterrupted one bit for bit, writers killed at random moments that leave only
//! complete checkpoints behind, and two processes saving into one directory.

mod common;

use common::scratch::Scratch;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use rumus::data::{DataLoader, Dataset, Features, InMemory, Sample};
use rumus::io::{Checkpoint, CheckpointManager, read_state, save_safetensors, write_atomic};
use rumus::nn::functional::dropout;
use rumus::nn::{CrossEntropyOptions, StateDict, cross_entropy};
use rumus::optim::{Adam, AdamConfig, CosineAnnealingLr, LrScheduler, Optimizer, OptimizerState};
use rumus::prelude::*;
use rumus::rng::{Generator, global_state, set_global_state};

/// Tests draw from (and restore) the process-wide generator; running them in parallel would
/// interleave their draws, so each holds this lock.
static GLOBAL_RNG: Mutex<()> = Mutex::new(());

fn lock_rng() -> MutexGuard<'static, ()> {
    GLOBAL_RNG.lock().unwrap_or_else(|p| p.into_inner())
}

#[model]
struct Mlp {
    fc1: Linear<8, 16>,
    fc2: Linear<16, 3>,
}

impl Mlp {
    /// Dropout in training mode, so the process-wide generator shapes every step.
    fn forward(&self, x: &DynTensor) -> rumus::Result<DynTensor> {
        let h = self.fc1.forward_dyn(x)?.relu()?;
        self.fc2.forward_dyn(&dropout(&h, 0.3, true)?)
    }
}

#[model]
struct WiderMlp {
    fc1: Linear<8, 12>,
    fc2: Linear<12, 3>,
}

// ---------------------------------------------------------------------------------------
// Comparing checkpoints bit for bit.

fn bits(t: &DynTensor) -> Vec<u64> {
    match t.dtype() {
        DType::F32 => t
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits() as u64)
            .collect(),
        DType::F64 => t
            .to_vec::<f64>()
            .unwrap()
            .iter()
            .map(|v| v.to_bits())
            .collect(),
        DType::I64 => t
            .to_vec::<i64>()
            .unwrap()
            .iter()
            .map(|&v| v as u64)
            .collect(),
        DType::F16 => t
            .to_vec::<rumus::f16>()
            .unwrap()
            .iter()
            .map(|v| u64::from(v.to_bits()))
            .collect(),
        DType::Bool => t
            .to_vec::<bool>()
            .unwrap()
            .iter()
            .map(|&v| v as u64)
            .collect(),
        other => panic!("no bit comparison for {other} tensors"),
    }
}

fn assert_same_tensors(a: &StateDict, b: &StateDict, what: &str) {
    let names = |s: &StateDict| s.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(a), names(b), "{what}: names in order");
    for ((name, x), (_, y)) in a.iter().zip(b) {
        assert_eq!(x.dims(), y.dims(), "{what} `{name}`: dims");
        assert_eq!(x.dtype(), y.dtype(), "{what} `{name}`: dtype");
        assert!(bits(x) == bits(y), "{what} `{name}`: values differ");
    }
}

fn assert_same_optimizer(a: &OptimizerState, b: &OptimizerState) {
    let lr_bits = |s: &OptimizerState| s.lrs.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(lr_bits(a), lr_bits(b), "learning rates, bit for bit");
    assert_eq!(a.steps, b.steps, "per-parameter step counts");
    assert_same_tensors(&a.buffers, &b.buffers, "optimizer buffer");
}

fn assert_same_checkpoint(a: &Checkpoint, b: &Checkpoint) {
    assert_same_tensors(&a.model, &b.model, "model");
    assert_same_optimizer(&a.optimizer, &b.optimizer);
    assert_eq!(a.scheduler_epoch, b.scheduler_epoch);
    assert_eq!(a.rng, b.rng);
    assert_eq!((a.epoch, a.step), (b.epoch, b.step));
    assert_eq!(a.metadata, b.metadata);
}

// ---------------------------------------------------------------------------------------
// A small training run: Adam(W, amsgrad) with a cosine schedule stepped every batch.

const SAMPLES: usize = 32;
const BATCH: usize = 4;
const STEPS_PER_EPOCH: u64 = (SAMPLES / BATCH) as u64;
const EPOCHS: u64 = 2;

/// 32 labelled samples of 8 features. Every read adds noise from the item's own generator
/// (an augmentation), so the loader's per-item randomness is part of what must resume
/// exactly.
fn synthetic_data() -> impl Dataset<Item = Sample> {
    let mut g = Generator::new(42);
    let samples = (0..SAMPLES)
        .map(|_| {
            let x: Vec<f32> = (0..8).map(|_| g.next_normal() as f32).collect();
            Sample::classified(Features::vector(x), g.below(3) as i64)
        })
        .collect();
    InMemory::new(samples).map_random(|mut sample: Sample, rng: &mut Generator| {
        for v in &mut sample.input.values {
            *v += 0.05 * rng.next_normal() as f32;
        }
        Ok(sample)
    })
}

/// A shuffling loader with two workers over [`synthetic_data`].
fn loader() -> DataLoader<impl Dataset<Item = Sample>> {
    DataLoader::new(synthetic_data(), BATCH)
        .unwrap()
        .shuffle(1000)
        .workers(2)
}

struct Run {
    model: Mlp,
    optimizer: Adam,
    scheduler: LrScheduler<CosineAnnealingLr>,
}

/// A fresh model (initialised from `seed`), optimizer and scheduler.
fn fresh_run(seed: u64) -> Run {
    manual_seed(seed);
    let model = Mlp::new().unwrap();
    let config = AdamConfig {
        lr: 1e-2,
        weight_decay: 1e-2,
        decoupled: true,
        amsgrad: true,
        ..AdamConfig::adam()
    };
    let mut optimizer = Adam::new(model.parameters(), config).unwrap();
    let schedule = CosineAnnealingLr {
        t_max: EPOCHS * STEPS_PER_EPOCH,
        eta_min: 1e-4,
    };
    let scheduler = LrScheduler::new(&mut optimizer, schedule);
    Run {
        model,
        optimizer,
        scheduler,
    }
}

/// Trains global steps `start..end`: step `s` is batch `s % 8` of epoch `s / 8`. A range
/// that starts mid-epoch resumes the loader with `epoch_from`; one that ends mid-epoch drops
/// the epoch with workers still loading.
fn train_steps(
    run: &mut Run,
    loader: &mut DataLoader<impl Dataset<Item = Sample> + 'static>,
    start: u64,
    end: u64,
) {
    let mut step = start;
    while step < end {
        let (epoch, batch) = (step / STEPS_PER_EPOCH, step % STEPS_PER_EPOCH);
        let take = (end - step).min(STEPS_PER_EPOCH - batch) as usize;
        for batch in loader.epoch_from(epoch, batch as usize).take(take) {
            let batch = batch.unwrap();
            let logits = run.model.forward(&batch.input).unwrap();
            let loss =
                cross_entropy(&logits, &batch.target, &CrossEntropyOptions::default()).unwrap();
            run.optimizer.step(&mut loss.backward().unwrap()).unwrap();
            run.scheduler.step(&mut run.optimizer);
            step += 1;
        }
    }
}

/// Parameters and optimizer state at the end of the run.
fn outcome(run: &Run) -> (StateDict, OptimizerState) {
    (
        run.model.state_dict().unwrap(),
        run.optimizer.state_dict().unwrap(),
    )
}

fn uninterrupted() -> (StateDict, OptimizerState) {
    let mut run = fresh_run(1);
    train_steps(&mut run, &mut loader(), 0, EPOCHS * STEPS_PER_EPOCH);
    outcome(&run)
}

/// Trains to the middle of epoch 1, saves, throws everything away, rebuilds from another
/// seed, restores from the file and finishes. `tamper` runs right after the restore.
fn interrupted(path: &Path, tamper: impl FnOnce()) -> (StateDict, OptimizerState) {
    let stop = STEPS_PER_EPOCH + STEPS_PER_EPOCH / 2;
    {
        let mut run = fresh_run(1);
        train_steps(&mut run, &mut loader(), 0, stop);
        let epoch = stop / STEPS_PER_EPOCH;
        Checkpoint::capture(
            &run.model,
            &run.optimizer,
            Some(run.scheduler.epoch()),
            epoch,
            stop,
        )
        .unwrap()
        .with_metadata("run", "resume-test")
        .save(path)
        .unwrap();
    }
    let mut run = fresh_run(999);
    let checkpoint = Checkpoint::load(path).unwrap();
    assert_ne!(
        bits(&run.model.state_dict().unwrap()[0].1),
        bits(&checkpoint.model[0].1),
        "the fresh model starts elsewhere"
    );
    checkpoint.restore(&run.model, &mut run.optimizer).unwrap();
    run.scheduler
        .set_epoch(&mut run.optimizer, checkpoint.scheduler_epoch.unwrap());
    tamper();
    // A new process would build a new loader: its position comes from the checkpoint.
    train_steps(
        &mut run,
        &mut loader(),
        checkpoint.step,
        EPOCHS * STEPS_PER_EPOCH,
    );
    outcome(&run)
}

#[test]
fn a_resumed_run_equals_the_uninterrupted_one_bit_for_bit() {
    let _rng = lock_rng();
    let scratch = Scratch::new("checkpoints-resume");
    let path = scratch.join("mid-epoch.safetensors");
    let (params_a, optimizer_a) = uninterrupted();
    let (params_b, optimizer_b) = interrupted(&path, || {});
    assert_same_tensors(&params_a, &params_b, "parameter");
    assert_same_optimizer(&optimizer_a, &optimizer_b);

    // The comparison is sensitive: without the saved generator state the dropout masks
    // after the resume differ, and so do the parameters.
    let (params_c, _) = interrupted(&path, || set_global_state(Generator::new(5)));
    assert!(
        params_a
            .iter()
            .zip(&params_c)
            .any(|((_, a), (_, c))| bits(a) != bits(c)),
        "restoring the generator matters"
    );
}

// ---------------------------------------------------------------------------------------
// Round trips.

/// A checkpoint of a model trained two steps, with extra tensors of every dtype and awkward
/// values, learning rates that only survive exact formatting, and metadata with odd
/// characters.
fn rich_checkpoint() -> Checkpoint {
    let mut run = fresh_run(3);
    train_steps(&mut run, &mut loader(), 0, 2);
    let mut checkpoint = Checkpoint::capture(
        &run.model,
        &run.optimizer,
        Some(run.scheduler.epoch()),
        0,
        2,
    )
    .unwrap();
    checkpoint.model.extend([
        (
            "extra.f64".to_string(),
            DynTensor::from_vec(vec![1.5f64, -0.0, f64::NAN, f64::MIN_POSITIVE], &[2, 2]).unwrap(),
        ),
        (
            "extra.i64".to_string(),
            DynTensor::from_vec(vec![i64::MIN, -1, 0, i64::MAX], &[4]).unwrap(),
        ),
        (
            "extra.bool".to_string(),
            DynTensor::from_vec(vec![true, false, true], &[3, 1]).unwrap(),
        ),
        (
            "extra.scalar".to_string(),
            DynTensor::from_vec(vec![7.0f32], &[]).unwrap(),
        ),
        (
            "extra.empty".to_string(),
            DynTensor::from_vec(Vec::<f32>::new(), &[0, 3]).unwrap(),
        ),
    ]);
    checkpoint.optimizer.lrs = vec![0.1 + 0.2, 5e-324, 1e300, 1.0 / 3.0];
    let mut rng = Generator::new(77);
    rng.next_normal(); // leaves the spare normal set
    checkpoint.rng = rng;
    checkpoint.scheduler_epoch = Some(7);
    checkpoint.epoch = 3;
    checkpoint.step = 12_345_678_901;
    checkpoint
        .with_metadata("run", "exp-1")
        .with_metadata("note", "line one\nline two = \"quoted\", ✓")
        .with_metadata("", "empty key")
}

#[test]
fn save_then_load_round_trips_every_field_exactly() {
    let _rng = lock_rng();
    let scratch = Scratch::new("checkpoints-round-trip");
    let original = rich_checkpoint();
    assert!(
        original.rng.state().1.is_some(),
        "the spare normal is tested"
    );
    let path = scratch.join("rich.safetensors");
    original.save(&path).unwrap();
    let loaded = Checkpoint::load(&path).unwrap();
    assert_same_checkpoint(&original, &loaded);

    // The byte-level versions agree with the file (whose header lists the metadata in no
    // fixed order, so compare what it holds), and a second round trip is identical.
    let from_file = std::fs::read(&path).unwrap();
    assert_same_checkpoint(
        &original,
        &Checkpoint::from_bytes(&from_file, "file").unwrap(),
    );
    assert_same_checkpoint(
        &original,
        &Checkpoint::from_bytes(&loaded.to_bytes().unwrap(), "memory").unwrap(),
    );

    // A minimal checkpoint: no scheduler, no optimizer groups, no metadata.
    let mut minimal = original.clone();
    minimal.model.truncate(1);
    minimal.optimizer = OptimizerState::default();
    minimal.scheduler_epoch = None;
    minimal.rng = Generator::new(1);
    minimal.metadata.clear();
    let again = Checkpoint::from_bytes(&minimal.to_bytes().unwrap(), "memory").unwrap();
    assert_same_checkpoint(&minimal, &again);

    // It stays an ordinary safetensors file, readable by name.
    let names: Vec<String> = read_state(&path)
        .unwrap()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert!(names.contains(&"model.fc1.weight".to_string()), "{names:?}");
    assert!(
        names.contains(&"optimizer.0.0.exp_avg".to_string()),
        "{names:?}"
    );
}

#[test]
fn names_that_cannot_be_stored_are_errors() {
    let _rng = lock_rng();
    let mut checkpoint = rich_checkpoint();
    let first = checkpoint.model[0].clone();
    checkpoint.model.push(first);
    let err = checkpoint.to_bytes().unwrap_err().to_string();
    assert!(
        err.contains("fc1.weight") && err.contains("appears twice"),
        "{err}"
    );
    checkpoint.model.pop();
    checkpoint.model[0].0 = "bad\nname".into();
    let err = checkpoint.to_bytes().unwrap_err().to_string();
    assert!(err.contains("line break"), "{err}");
}

// ---------------------------------------------------------------------------------------
// Damaged files.

fn small_checkpoint_bytes() -> Vec<u8> {
    let mut run = fresh_run(4);
    train_steps(&mut run, &mut loader(), 0, 1);
    Checkpoint::capture(&run.model, &run.optimizer, Some(1), 0, 1)
        .unwrap()
        .with_metadata("k", "v")
        .to_bytes()
        .unwrap()
}

/// Where the tensor data starts: after the 8-byte header length and the header.
fn data_start(bytes: &[u8]) -> usize {
    8 + u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize
}

#[test]
fn a_flipped_bit_in_the_data_is_reported_as_corruption_naming_the_file() {
    let _rng = lock_rng();
    let scratch = Scratch::new("checkpoints-flip");
    let bytes = small_checkpoint_bytes();
    let start = data_start(&bytes);
    for position in [start, start + 1, (start + bytes.len()) / 2, bytes.len() - 1] {
        let mut damaged = bytes.clone();
        damaged[position] ^= 0x10;
        let path = scratch.join(&format!("flipped-{position}.safetensors"));
        std::fs::write(&path, &damaged).unwrap();
        let err = Checkpoint::load(&path).unwrap_err();
        assert!(matches!(err, rumus::Error::Format { .. }), "{err:?}");
        let err = err.to_string();
        assert!(
            err.contains(&format!("flipped-{position}.safetensors"))
                && err.contains("corrupted: checksum mismatch"),
            "{err}"
        );
    }
}

#[test]
fn every_single_bit_flip_is_an_error_or_harmless() {
    let _rng = lock_rng();
    let bytes = small_checkpoint_bytes();
    let original = Checkpoint::from_bytes(&bytes, "original").unwrap();
    let mut errors = 0;
    for position in 0..bytes.len() {
        let mut damaged = bytes.clone();
        damaged[position] ^= 1 << (position % 8);
        match Checkpoint::from_bytes(&damaged, "flipped") {
            Err(e) => {
                assert!(e.to_string().starts_with("flipped: "), "{e}");
                errors += 1;
            }
            // Only a flip that changes nothing the checkpoint holds may go unnoticed.
            Ok(loaded) => assert_same_checkpoint(&original, &loaded),
        }
    }
    assert!(
        errors > bytes.len() * 99 / 100,
        "{errors} of {}",
        bytes.len()
    );
}

#[test]
fn truncated_and_foreign_files_are_errors_naming_the_file() {
    let _rng = lock_rng();
    let scratch = Scratch::new("checkpoints-truncated");
    let bytes = small_checkpoint_bytes();
    let start = data_start(&bytes);
    let lengths = [
        0,
        1,
        7,
        8,
        9,
        start / 2,
        start - 1,
        start,
        start + 1,
        (start + bytes.len()) / 2,
        bytes.len() - 1,
    ];
    for length in lengths {
        let path = scratch.join(&format!("cut-{length}.safetensors"));
        std::fs::write(&path, &bytes[..length]).unwrap();
        let err = Checkpoint::load(&path).unwrap_err().to_string();
        assert!(
            err.contains(&format!("cut-{length}.safetensors")) && err.contains("truncated"),
            "{err}"
        );
    }

    let mut g = Generator::new(9);
    for length in [1usize, 8, 9, 100, 4096] {
        let garbage: Vec<u8> = (0..length).map(|_| g.next_u64() as u8).collect();
        assert!(Checkpoint::from_bytes(&garbage, "garbage").is_err());
    }
    let mut huge_header = u64::MAX.to_le_bytes().to_vec();
    huge_header.extend(b"{}");
    assert!(Checkpoint::from_bytes(&huge_header, "huge").is_err());

    // A header whose shape overflows any element count (checked, not wrapped).
    let header = br#"{"model.w":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904,4],"data_offsets":[0,0]}}"#;
    let mut hostile = (header.len() as u64).to_le_bytes().to_vec();
    hostile.extend(header);
    let err = Checkpoint::from_bytes(&hostile, "hostile")
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("hostile: "), "{err}");
    let path = scratch.join("hostile.safetensors");
    std::fs::write(&path, &hostile).unwrap();
    assert!(read_state(&path).is_err());

    // Model weights are a safetensors file but not a checkpoint.
    let weights = scratch.join("weights.safetensors");
    save_safetensors(&Mlp::new().unwrap(), &weights).unwrap();
    let err = Checkpoint::load(&weights).unwrap_err().to_string();
    assert!(err.contains("not a rumus checkpoint"), "{err}");

    // A newer format version is named as such, before any checksum complaint.
    let (from, to) = (br#""format_version":"1""#, br#""format_version":"2""#);
    let at = bytes.windows(from.len()).position(|w| w == from).unwrap();
    let mut newer = bytes.clone();
    newer[at..at + to.len()].copy_from_slice(to);
    let err = Checkpoint::from_bytes(&newer, "newer")
        .unwrap_err()
        .to_string();
    assert!(err.contains("format version 2"), "{err}");

    let err = Checkpoint::load(scratch.join("missing.safetensors"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.safetensors"), "{err}");
}

// ---------------------------------------------------------------------------------------
// Values no run can be in, behind a valid checksum.

/// CRC-32 (IEEE, as zlib and `crc32fast` compute it), bit by bit.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
        }
    }
    !crc
}

/// A checkpoint file as another tool might write it: no tensors, the metadata of an empty
/// run with `changes` applied, and the checksum rumus computes (documented in
/// `rumus/src/io/checkpoint.rs`: every entry but the checksum, sorted by key, each key and
/// value preceded by its length as a u64).
fn crafted_checkpoint(changes: &[(&str, &str)]) -> Vec<u8> {
    let mut meta = BTreeMap::from([
        ("format", "rumus.checkpoint"),
        ("format_version", "1"),
        ("epoch", "0"),
        ("step", "0"),
        ("scheduler_epoch", "none"),
        ("optimizer.lrs", ""),
        ("optimizer.steps", ""),
        ("model.order", ""),
        ("optimizer.order", ""),
        ("rng.state", "1,0,0,0"),
        ("rng.spare_normal", "none"),
    ]);
    meta.extend(changes.iter().copied());
    let mut canonical = Vec::new();
    for (key, value) in &meta {
        for text in [key, value] {
            canonical.extend((text.len() as u64).to_le_bytes());
            canonical.extend(text.as_bytes());
        }
    }
    let checksum = format!("crc32:{:08x}", crc32(&canonical));
    let entries: Vec<String> = meta
        .iter()
        .map(|(k, v)| (*k, *v))
        .chain([("checksum", checksum.as_str())])
        .map(|(k, v)| format!("{k:?}:{:?}", v))
        .collect();
    let header = format!("{{\"__metadata__\":{{{}}}}}", entries.join(","));
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    bytes
}

#[test]
fn crafted_files_with_values_no_run_can_be_in_are_refused_naming_key_and_value() {
    // The crafting is right: unchanged, the file loads.
    let plain = Checkpoint::from_bytes(&crafted_checkpoint(&[]), "plain.safetensors").unwrap();
    assert_eq!((plain.step, plain.optimizer.lrs.len()), (0, 0));
    assert_eq!(plain.source.as_deref(), Some("plain.safetensors"));

    let max = u64::MAX.to_string();
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "optimizer.lrs",
            "NaN",
            &["`optimizer.lrs` entry 0", "is NaN", "finite number >= 0"],
        ),
        (
            "optimizer.lrs",
            "1e-3,-1e-3",
            &["`optimizer.lrs` entry 1", "is -0.001", ">= 0"],
        ),
        (
            "optimizer.lrs",
            "inf",
            &["entry 0", "is inf", "finite number"],
        ),
        (
            "step",
            &max,
            &["`step` is 18446744073709551615", "at most 2^53"],
        ),
        (
            "epoch",
            &max,
            &["`epoch` is 18446744073709551615", "at most 2^53"],
        ),
        (
            "scheduler_epoch",
            &max,
            &["`scheduler_epoch` is 18446744073709551615"],
        ),
        (
            "optimizer.steps",
            "0.0=18446744073709551615\n",
            &[
                "`optimizer.steps` of parameter `0.0` is 18446744073709551615",
                "2^53",
            ],
        ),
        ("rng.state", "0,0,0,0", &["`rng.state`", "all zeros"]),
        (
            "rng.spare_normal",
            "7ff8000000000000",
            &[
                "`rng.spare_normal`",
                "spare normal sample is NaN",
                "at most 8.57",
            ],
        ),
        (
            "rng.spare_normal",
            "4024000000000000",
            &["spare normal sample is 10 ("],
        ),
    ];
    for &(key, value, expected) in cases {
        let name = format!("crafted-{key}.safetensors");
        let err = Checkpoint::from_bytes(&crafted_checkpoint(&[(key, value)]), &name)
            .expect_err(&format!("{key} = {value:?} loaded"));
        assert!(matches!(err, rumus::Error::Format { .. }), "{err:?}");
        let message = err.to_string();
        assert!(message.starts_with(&format!("{name}: ")), "{message}");
        for fragment in expected {
            assert!(message.contains(fragment), "{key} = {value:?}: {message}");
        }
    }
}

/// `checkpoint`'s buffer `name` of parameter `0.0` with element 1 set to `value`.
fn with_buffer_value(mut checkpoint: Checkpoint, name: &str, value: f32) -> Checkpoint {
    let key = format!("0.0.{name}");
    let (_, buffer) = checkpoint
        .optimizer
        .buffers
        .iter_mut()
        .find(|(k, _)| *k == key)
        .unwrap_or_else(|| panic!("no buffer {key}"));
    let mut values = buffer.to_vec::<f32>().unwrap();
    values[1] = value;
    *buffer = DynTensor::from_vec(values, buffer.dims()).unwrap();
    checkpoint
}

#[test]
fn restoring_values_no_run_can_be_in_is_an_error_that_changes_nothing() {
    let _rng = lock_rng();
    let mut run = fresh_run(8);
    train_steps(&mut run, &mut loader(), 0, 2);
    let mut good = Checkpoint::capture(&run.model, &run.optimizer, Some(2), 0, 2).unwrap();
    good.source = Some("runs/exp/checkpoint-2.safetensors".into());

    let tampered: Vec<(Checkpoint, &[&str])> = vec![
        (
            Checkpoint {
                optimizer: OptimizerState {
                    lrs: vec![f64::NAN],
                    ..good.optimizer.clone()
                },
                ..good.clone()
            },
            &["`optimizer.lrs` entry 0", "is NaN"],
        ),
        (
            Checkpoint {
                step: u64::MAX,
                ..good.clone()
            },
            &["`step` is 18446744073709551615", "2^53"],
        ),
        (
            Checkpoint {
                scheduler_epoch: Some(u64::MAX),
                ..good.clone()
            },
            &["`scheduler_epoch` is 18446744073709551615"],
        ),
        (
            Checkpoint {
                optimizer: OptimizerState {
                    steps: vec![("0.0".into(), u64::MAX)],
                    ..good.optimizer.clone()
                },
                ..good.clone()
            },
            &["`optimizer.steps` of parameter `0.0`"],
        ),
        (
            with_buffer_value(good.clone(), "exp_avg_sq", -1.0),
            &[
                "`optimizer.0.0.exp_avg_sq` holds -1 at element 1",
                "finite and >= 0",
            ],
        ),
        (
            with_buffer_value(good.clone(), "exp_avg", f32::INFINITY),
            &[
                "`optimizer.0.0.exp_avg` holds inf at element 1",
                "must be finite",
            ],
        ),
    ];

    manual_seed(9);
    let model = Mlp::new().unwrap();
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam()).unwrap();
    let before = (
        model.state_dict().unwrap(),
        optimizer.state_dict().unwrap(),
        global_state(),
    );
    for (checkpoint, expected) in &tampered {
        let message = checkpoint
            .restore(&model, &mut optimizer)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("Checkpoint::restore: runs/exp/checkpoint-2.safetensors: "),
            "{message}"
        );
        for fragment in *expected {
            assert!(message.contains(fragment), "{message}");
        }
        assert_same_tensors(
            &before.0,
            &model.state_dict().unwrap(),
            "model after a failed restore",
        );
        assert_same_optimizer(&before.1, &optimizer.state_dict().unwrap());
        assert_eq!(before.2, global_state(), "the generator is untouched");

        // Nor is such a checkpoint saved, so a file rumus writes always loads.
        let message = checkpoint.to_bytes().unwrap_err().to_string();
        assert!(message.contains(expected[0]), "{message}");
    }
    good.restore(&model, &mut optimizer).unwrap();
    assert_same_optimizer(&good.optimizer, &optimizer.state_dict().unwrap());
}

// ---------------------------------------------------------------------------------------
// Restoring into the wrong model or optimizer.

#[test]
fn restoring_into_another_architecture_is_an_error_and_changes_nothing() {
    let _rng = lock_rng();
    let mut run = fresh_run(5);
    train_steps(&mut run, &mut loader(), 0, 1);
    let checkpoint = Checkpoint::capture(&run.model, &run.optimizer, None, 0, 1).unwrap();

    manual_seed(6);
    let wider = WiderMlp::new().unwrap();
    let mut optimizer = Adam::new(wider.parameters(), AdamConfig::adam()).unwrap();
    let before = (
        wider.state_dict().unwrap(),
        optimizer.state_dict().unwrap(),
        global_state(),
    );
    let err = checkpoint
        .restore(&wider, &mut optimizer)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("fc1.weight") && err.contains("[12, 8]") && err.contains("[16, 8]"),
        "{err}"
    );
    // Loaded from a file, the checkpoint's errors name the file too.
    let scratch = Scratch::new("checkpoints-wrong-architecture");
    let path = scratch.join("narrow.safetensors");
    checkpoint.save(&path).unwrap();
    let err = Checkpoint::load(&path)
        .unwrap()
        .restore(&wider, &mut optimizer)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!(
            "Checkpoint::restore: {}: parameter `fc1.weight`",
            path.display()
        )),
        "{err}"
    );
    assert_same_tensors(
        &before.0,
        &wider.state_dict().unwrap(),
        "model after a failed restore",
    );
    assert_same_optimizer(&before.1, &optimizer.state_dict().unwrap());
    assert_eq!(before.2, global_state(), "the generator is untouched");

    // The model matches but the optimizer does not (it holds only fc1): checked before the
    // model changes.
    let model = Mlp::new().unwrap();
    let mut partial = Adam::new(model.parameters()[..2].to_vec(), AdamConfig::adam()).unwrap();
    let before = (
        model.state_dict().unwrap(),
        partial.state_dict().unwrap(),
        global_state(),
    );
    let err = checkpoint
        .restore(&model, &mut partial)
        .unwrap_err()
        .to_string();
    assert!(err.contains("optimizer"), "{err}");
    assert_same_tensors(
        &before.0,
        &model.state_dict().unwrap(),
        "model after a failed restore",
    );
    assert_same_optimizer(&before.1, &partial.state_dict().unwrap());
    assert_eq!(before.2, global_state());

    // And the right pair restores.
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam()).unwrap();
    checkpoint.restore(&model, &mut optimizer).unwrap();
    assert_same_tensors(
        &checkpoint.model,
        &model.state_dict().unwrap(),
        "restored model",
    );
    assert_same_optimizer(&checkpoint.optimizer, &optimizer.state_dict().unwrap());
    assert_eq!(checkpoint.rng, global_state());
}

// ---------------------------------------------------------------------------------------
// Directories of checkpoints.

fn tiny_checkpoint(step: u64) -> Checkpoint {
    Checkpoint {
        model: vec![(
            "w".into(),
            DynTensor::from_vec(vec![step as f32; 4], &[4]).unwrap(),
        )],
        optimizer: OptimizerState::default(),
        scheduler_epoch: None,
        rng: Generator::new(step),
        epoch: 0,
        step,
        metadata: BTreeMap::new(),
        loop_state: BTreeMap::new(),
        source: None,
    }
}

fn file_names(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn a_manager_keeps_the_newest_n_and_skips_damaged_ones() {
    let scratch = Scratch::new("checkpoints-manager");
    let dir = scratch.join("run/checkpoints");
    assert!(CheckpointManager::new(&dir, 0).is_err());
    let manager = CheckpointManager::new(&dir, 3).unwrap();
    assert!(manager.latest().unwrap().is_none(), "an empty directory");

    // A leftover of a killed writer, older than what comes next, and an unrelated file.
    let stale = dir.join("checkpoint-0000000001.safetensors.tmp-1-0");
    std::fs::write(&stale, b"half a checkpoint").unwrap();
    let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(an_hour_ago)
        .unwrap();
    std::fs::write(dir.join("notes.txt"), b"keep me").unwrap();

    for step in 1..=7 {
        let path = manager.save(&tiny_checkpoint(step)).unwrap();
        assert_eq!(path, manager.path_for(step));
    }
    let listed = manager.list().unwrap();
    assert_eq!(
        file_names(&listed),
        [
            "checkpoint-0000000005.safetensors",
            "checkpoint-0000000006.safetensors",
            "checkpoint-0000000007.safetensors"
        ]
    );
    assert!(!stale.exists(), "the stale temporary file was removed");
    assert!(dir.join("notes.txt").exists(), "other files are left alone");
    // The three checkpoints, the notes, and the lock file that saves take turns through.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 5);
    assert!(dir.join(".lock").is_file());
    assert_eq!(manager.latest().unwrap().unwrap().step, 7);

    // Steps past ten digits still sort by step, not by name.
    manager.save(&tiny_checkpoint(12_345_678_901)).unwrap();
    assert_eq!(manager.list().unwrap().len(), 3);
    assert_eq!(manager.latest().unwrap().unwrap().step, 12_345_678_901);

    // A damaged newest file is skipped in favour of the next one, and reported.
    let newest = manager.path_for(12_345_678_901);
    std::fs::write(&newest, b"garbage").unwrap();
    let scan = manager.scan().unwrap();
    let (path, checkpoint) = scan.latest.unwrap();
    assert_eq!((path, checkpoint.step), (manager.path_for(7), 7));
    assert_eq!(scan.skipped.len(), 1);
    assert!(
        scan.skipped[0]
            .to_string()
            .contains("checkpoint-12345678901"),
        "{}",
        scan.skipped[0]
    );
    assert_eq!(manager.latest().unwrap().unwrap().step, 7);

    // When none loads, that is an error, not "start from scratch".
    for path in manager.list().unwrap() {
        std::fs::write(&path, b"garbage").unwrap();
    }
    let err = manager.latest().unwrap_err().to_string();
    assert!(err.contains("none of the 3 checkpoints loads"), "{err}");
}

#[test]
fn atomic_writes_replace_the_file_or_leave_it_untouched() {
    let scratch = Scratch::new("checkpoints-atomic");
    let path = scratch.join("file.bin");
    write_atomic(&path, b"first").unwrap();
    write_atomic(&path, b"second").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"second");

    // A target that cannot be replaced (a directory) is an error; no temporary file stays.
    let blocked = scratch.join("blocked");
    std::fs::create_dir(&blocked).unwrap();
    std::fs::write(blocked.join("inside"), b"x").unwrap();
    let err = write_atomic(&blocked, b"data").unwrap_err().to_string();
    assert!(err.contains("blocked"), "{err}");
    let err = write_atomic(&scratch.join("no/such/dir/file.bin"), b"data")
        .unwrap_err()
        .to_string();
    assert!(err.contains("no/such/dir"), "{err}");
    let names: Vec<String> = std::fs::read_dir(scratch.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
}

// ---------------------------------------------------------------------------------------
// Killing a writer at random moments.

const CHILD_ENV: &str = "RUMUS_CHECKPOINT_CHILD_DIR";
const CHILD_TEST: &str = "child_process_that_writes_checkpoints_until_killed";
/// 256K f32 values each for the model and the optimizer buffer: 2 MB per checkpoint.
const CRASH_VALUES: usize = 1 << 18;

fn crash_value(step: u64, i: usize, salt: u64) -> f32 {
    // Below 2^24, so exact in f32.
    ((step * 1_000_003 + i as u64 * 7 + salt) % 16_777_213) as f32
}

fn crash_checkpoint(step: u64) -> Checkpoint {
    numbered_checkpoint(step, CRASH_VALUES)
}

/// A checkpoint whose every value is a function of `step`, with `values` (a multiple of 64)
/// f32 values each for the model and the optimizer buffer.
fn numbered_checkpoint(step: u64, values: usize) -> Checkpoint {
    let tensor = |salt| {
        let data = (0..values).map(|i| crash_value(step, i, salt)).collect();
        DynTensor::from_vec(data, &[values / 64, 64]).unwrap()
    };
    Checkpoint {
        model: vec![("weight".into(), tensor(0))],
        optimizer: OptimizerState {
            lrs: vec![step as f64 * 1e-3],
            steps: vec![("0.0".into(), step)],
            buffers: vec![("0.0.exp_avg".into(), tensor(1))],
        },
        scheduler_epoch: Some(step),
        rng: Generator::new(step),
        epoch: step / 10,
        step,
        metadata: BTreeMap::from([("step".to_string(), step.to_string())]),
        loop_state: BTreeMap::new(),
        source: None,
    }
}

/// Everything in `checkpoint` is what `crash_checkpoint(step)` wrote.
fn verify_crash_checkpoint(checkpoint: &Checkpoint, step: u64) {
    assert_eq!(checkpoint.step, step);
    assert_same_checkpoint(checkpoint, &crash_checkpoint(step));
}

/// Run by the crash test as a child process; returns at once in an ordinary test run.
#[test]
fn child_process_that_writes_checkpoints_until_killed() {
    let Some(dir) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let manager = CheckpointManager::new(PathBuf::from(dir), 3).unwrap();
    let started = Instant::now();
    // Bounded, so an orphan (parent gone) stops by itself.
    for step in 1.. {
        manager.save(&crash_checkpoint(step)).unwrap();
        if started.elapsed() > Duration::from_secs(60) {
            break;
        }
    }
}

#[test]
fn killing_the_writer_at_any_moment_leaves_only_complete_checkpoints() {
    const KILLS: u64 = 20;
    let exe = std::env::current_exe().unwrap();
    let (mut verified, mut temp_files_left, mut highest_step) = (0, 0, 0);
    for kill in 0..KILLS {
        let scratch = Scratch::new(&format!("crash-{kill}"));
        let mut child = Command::new(&exe)
            .args(["--exact", CHILD_TEST, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, scratch.dir())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let manager = CheckpointManager::new(scratch.dir(), 3).unwrap();
        let waiting = Instant::now();
        while manager.list().unwrap().is_empty() {
            if child.try_wait().unwrap().is_some() {
                let output = child.wait_with_output().unwrap();
                panic!(
                    "the writer exited before it was killed ({}): {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            if waiting.elapsed() > Duration::from_secs(120) {
                child.kill().unwrap();
                panic!("the writer wrote no checkpoint in two minutes");
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // 0 to 57 ms into the writing loop (a few checkpoints): before, during and after
        // writes, renames and deletions of old checkpoints.
        std::thread::sleep(Duration::from_millis(kill * 13 % 60));
        child.kill().unwrap();
        child.wait().unwrap();

        let latest = manager
            .latest()
            .unwrap()
            .expect("a checkpoint survives the kill");
        let files = manager.list().unwrap();
        assert!(
            (1..=4).contains(&files.len()),
            "keep_last 3, plus one written just before the kill: {:?}",
            file_names(&files)
        );
        assert_eq!(
            latest.step,
            step_in_name(files.last().unwrap()),
            "the newest file loads"
        );
        for path in &files {
            let checkpoint = Checkpoint::load(path)
                .unwrap_or_else(|e| panic!("kill {kill}: {} does not load: {e}", path.display()));
            verify_crash_checkpoint(&checkpoint, step_in_name(path));
            verified += 1;
        }
        highest_step = highest_step.max(latest.step);
        temp_files_left += temp_files(scratch.dir());

        // Resuming writes on: the next save removes what the killed writer left behind.
        let written = manager.save(&crash_checkpoint(latest.step + 1)).unwrap();
        let modified = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
        for entry in std::fs::read_dir(scratch.dir()).unwrap() {
            let path = entry.unwrap().path();
            if path.to_string_lossy().contains(".tmp-") {
                // Only a file-system clock too coarse to order them could keep one.
                assert!(
                    modified(&path) >= modified(&written),
                    "stale temporary file {} was not removed",
                    path.display()
                );
            }
        }
        assert!(manager.list().unwrap().len() <= 3);
        assert_eq!(manager.latest().unwrap().unwrap().step, latest.step + 1);
    }
    println!(
        "{KILLS} kills: {verified} checkpoints verified, {temp_files_left} temporary files \
         left by interrupted writes, highest step reached {highest_step}"
    );
}

fn temp_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .contains(".tmp-")
        })
        .count()
}

/// The step in a `checkpoint-<step>.safetensors` file name.
fn step_in_name(path: &Path) -> u64 {
    let name = path.file_name().unwrap().to_string_lossy();
    name.trim_start_matches("checkpoint-")
        .trim_end_matches(".safetensors")
        .parse()
        .unwrap()
}

// ---------------------------------------------------------------------------------------
// Two processes saving into one directory.

const SHARED_DIR_ENV: &str = "RUMUS_CHECKPOINT_SHARED_DIR";
const SHARER_ENV: &str = "RUMUS_CHECKPOINT_SHARER";
const SHARER_TEST: &str = "child_process_that_saves_into_a_shared_directory";
const SHARED_KEEP: usize = 3;
/// The two processes save steps 1 to `SHARED_LAST` between them: sharer 0 every
/// `SHARED_BIG_EVERY`-th step, as 8 MB checkpoints, sharer 1 every other step, as small
/// ones. While a big checkpoint is being written, the small writer saves (and cleans up)
/// several times: what a directory without a lock gets wrong.
const SHARED_LAST: u64 = 900;
const SHARED_BIG_EVERY: u64 = 30;

fn shared_checkpoint(step: u64) -> Checkpoint {
    let values = if step.is_multiple_of(SHARED_BIG_EVERY) {
        1 << 20
    } else {
        64
    };
    numbered_checkpoint(step, values)
}

fn sharer_steps(sharer: u64) -> impl Iterator<Item = u64> {
    (1..=SHARED_LAST).filter(move |step| step.is_multiple_of(SHARED_BIG_EVERY) == (sharer == 0))
}

/// Run by the shared-directory test as one of its two writers; returns at once in an
/// ordinary test run. Every save must succeed.
#[test]
fn child_process_that_saves_into_a_shared_directory() {
    let (Some(dir), Ok(sharer)) = (std::env::var_os(SHARED_DIR_ENV), std::env::var(SHARER_ENV))
    else {
        return;
    };
    let sharer: u64 = sharer.parse().unwrap();
    let manager = CheckpointManager::new(PathBuf::from(dir), SHARED_KEEP).unwrap();
    let failures: Vec<String> = sharer_steps(sharer)
        .filter_map(|step| {
            let saved = manager.save(&shared_checkpoint(step));
            saved.err().map(|e| format!("step {step}: {e}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "sharer {sharer}: {} of {} saves failed: {failures:#?}",
        failures.len(),
        sharer_steps(sharer).count()
    );
}

#[test]
fn two_processes_saving_into_one_directory_lose_nothing() {
    let exe = std::env::current_exe().unwrap();
    let scratch = Scratch::new("checkpoints-shared");
    let mut children: Vec<_> = (0..2)
        .map(|sharer| {
            Command::new(&exe)
                .args(["--exact", SHARER_TEST, "--nocapture", "--test-threads=1"])
                .env(SHARED_DIR_ENV, scratch.dir())
                .env(SHARER_ENV, sharer.to_string())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();

    // Meanwhile this process resumes again and again: the newest checkpoint always loads,
    // and it never goes back to an older step.
    let manager = CheckpointManager::new(scratch.dir(), SHARED_KEEP).unwrap();
    let (mut newest_seen, mut read_failures) = (0, Vec::new());
    while children
        .iter_mut()
        .any(|child| child.try_wait().unwrap().is_none())
    {
        match manager.latest() {
            Ok(Some(latest)) if latest.step >= newest_seen => newest_seen = latest.step,
            Ok(Some(latest)) => {
                read_failures.push(format!("step {} after step {newest_seen}", latest.step))
            }
            Ok(None) if newest_seen == 0 => {}
            Ok(None) => read_failures.push(format!("nothing after step {newest_seen}")),
            Err(e) => read_failures.push(e.to_string()),
        }
    }
    for (sharer, child) in children.into_iter().enumerate() {
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "sharer {sharer} ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    assert!(read_failures.is_empty(), "{read_failures:#?}");

    // The newest SHARED_KEEP steps remain, each complete, and no temporary file. (Each
    // sharer's steps increase and both own one of the newest three, so no save can prune
    // those three, whatever order the saves took turns in.)
    let files = manager.list().unwrap();
    let steps: Vec<u64> = files.iter().map(|p| step_in_name(p)).collect();
    let newest: Vec<u64> = (SHARED_LAST + 1 - SHARED_KEEP as u64..=SHARED_LAST).collect();
    assert_eq!(steps, newest, "{:?}", file_names(&files));
    for (path, &step) in files.iter().zip(&steps) {
        let checkpoint = Checkpoint::load(path).unwrap();
        assert_same_checkpoint(&checkpoint, &shared_checkpoint(step));
    }
    assert_eq!(temp_files(scratch.dir()), 0);
}
