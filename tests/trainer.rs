//! `Trainer`: a run resumed from a checkpoint equals the uninterrupted run bit for bit (model,
//! optimizer, plateau scheduler, generator, early stopping, history, CSV rows); early
//! stopping against scripted metric sequences; callbacks that step schedulers and save
//! checkpoints with what they are lent; the CSV log as it is written; TensorBoard event files
//! decoded independently (TFRecord framing, CRC-32C, protobuf); and the PNG curves decoded
//! and inspected.

mod common;

use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use common::scratch::Scratch;
use rumus::data::{Batch, Collate, DataLoader, Dataset, Features, InMemory, Sample};
use rumus::io::Checkpoint;
use rumus::nn::functional::dropout;
use rumus::nn::{BatchNorm1d, Dropout, ModeGuard, StateDict};
use rumus::optim::{
    Adam, AdamConfig, LrScheduler, Optimizer, PlateauConfig, ReduceLrOnPlateau, Sgd, SgdConfig,
    StepLr,
};
use rumus::prelude::*;
use rumus::rng::Generator;
use rumus::train::{
    Accuracy, CURVE_SIZE, EVAL_COLOR, EarlyStopping, EpochSummary, Monitor, PhaseSummary, Run,
    StepOutput, TRAIN_COLOR, Trainer, classification, write_curve,
};

/// Tests that draw from the process-wide generator (every model initialisation does) hold
/// this lock, so that parallel tests do not interleave their draws.
static GLOBAL_RNG: Mutex<()> = Mutex::new(());

fn lock_rng() -> MutexGuard<'static, ()> {
    GLOBAL_RNG.lock().unwrap_or_else(|p| p.into_inner())
}

// ---------------------------------------------------------------------------------------
// Resuming.

#[model]
struct Mlp {
    fc1: Linear<8, 16>,
    fc2: Linear<16, 3>,
}

impl Mlp {
    /// Dropout while training, so the process-wide generator shapes every step.
    fn logits(&self, x: &DynTensor, training: bool) -> rumus::Result<DynTensor> {
        let h = self.fc1.forward_dyn(x)?.relu()?;
        self.fc2.forward_dyn(&dropout(&h, 0.3, training)?)
    }
}

/// 64 labelled samples of 8 features, with noise from each item's own generator on every
/// read (an augmentation the loader must replay exactly).
fn data() -> impl Dataset<Item = Sample> {
    let mut g = Generator::new(42);
    let samples = (0..64)
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

/// The outcome of a run: its history (without the wall-clock times), the final parameters
/// and optimizer rates, and the CSV it wrote (without the seconds column).
#[derive(Debug, PartialEq)]
struct Outcome {
    history: Vec<(usize, PhaseSummary, PhaseSummary, u64)>,
    model: Vec<(String, Vec<u64>)>,
    lrs: Vec<u64>,
    csv: Vec<String>,
}

fn bits(state: &StateDict) -> Vec<(String, Vec<u64>)> {
    state
        .iter()
        .map(|(n, t)| {
            (
                n.clone(),
                t.to_f64_vec().iter().map(|v| v.to_bits()).collect(),
            )
        })
        .collect()
}

/// The CSV's rows without their last column (the seconds, which differ between runs).
fn csv_without_seconds(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.rsplit_once(',').unwrap().0.to_string())
        .collect()
}

/// Trains the MLP for `trainer.epochs` epochs (or what a resumed run lacks) with Adam, a
/// plateau scheduler that cuts often (a new best must halve the loss), dropout and a
/// shuffling loader; `after_epoch(epoch, checkpoint)` sees the checkpoint of every epoch.
fn train(trainer: Trainer, csv: &Path, mut after_epoch: impl FnMut(usize, Checkpoint)) -> Outcome {
    rumus::manual_seed(5);
    let model = Mlp::new().unwrap();
    let mut optimizer = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 1e-2,
            ..AdamConfig::adam()
        },
    )
    .unwrap();
    let mut scheduler = ReduceLrOnPlateau::new(PlateauConfig {
        factor: 0.5,
        patience: 0,
        threshold: 0.5,
        cooldown: 1,
        ..PlateauConfig::min()
    })
    .unwrap();
    if trainer.resume.is_some() {
        // Another generator state than the fresh run's, to prove the checkpoint's is used.
        rumus::manual_seed(12345);
    }
    let mut loader = DataLoader::new(data(), 8).unwrap().shuffle(9);
    let eval: Vec<Sample> = (0..16).map(|i| data().get(i).unwrap()).collect();
    let eval = Sample::collate(eval).unwrap();
    let measure = |batch: &Batch, training: bool| {
        let logits = model.logits(&batch.input, training)?;
        classification(&logits, &batch.target)
    };
    let history = trainer
        .quiet()
        .csv(csv)
        .metric(Accuracy::new())
        .early_stopping(EarlyStopping::new(Monitor::EVAL_LOSS).patience(100))
        .fit(
            Run::new(&model, &mut optimizer).scheduler(&mut scheduler),
            |epoch| Ok(loader.epoch_from(epoch as u64 - 1, 0)),
            |batch: Batch, optimizer| {
                let (loss, output) = measure(&batch, true)?;
                optimizer.step(&mut loss.backward()?)?;
                Ok(output)
            },
            || Ok([measure(&eval, false).map(|(_, output)| output)]),
            |end| {
                after_epoch(end.summary.epoch, end.checkpoint().unwrap());
                Ok(())
            },
        )
        .unwrap();
    Outcome {
        history: history
            .iter()
            .map(|s| (s.epoch, s.train.clone(), s.eval.clone(), s.lr.to_bits()))
            .collect(),
        model: bits(&model.state_dict().unwrap()),
        lrs: optimizer.lrs().iter().map(|v| v.to_bits()).collect(),
        csv: csv_without_seconds(csv),
    }
}

// ---------------------------------------------------------------------------------------
// Training and evaluation mode.

#[model]
struct NormedMlp {
    fc1: Linear<8, 16>,
    norm: BatchNorm1d<16>,
    #[dropout(p = 0.5)]
    drop: Dropout,
    fc2: Linear<16, 3>,
}

impl NormedMlp {
    fn logits(&self, x: &DynTensor) -> rumus::Result<DynTensor> {
        let h = self.norm.forward_dyn(&self.fc1.forward_dyn(x)?)?.relu()?;
        self.fc2.forward_dyn(&self.drop.forward_dyn(&h)?)
    }
}

/// No code in the closures switches modes, yet the steps run in training mode and the
/// evaluation in evaluation mode: the logged evaluation equals an evaluation-mode pass made
/// after training, BatchNorm's running statistics count the training steps only, and the
/// model is back in training mode afterwards.
#[test]
fn the_trainer_validates_in_evaluation_mode() {
    let _rng = lock_rng();
    rumus::manual_seed(3);
    let model = NormedMlp::new().unwrap();
    let config = SgdConfig {
        lr: 0.1,
        ..SgdConfig::default()
    };
    let mut optimizer = Sgd::new(model.parameters(), config).unwrap();
    let mut loader = DataLoader::new(data(), 8).unwrap().shuffle(1);
    let eval = Sample::collate((0..16).map(|i| data().get(i).unwrap()).collect()).unwrap();
    let measure = |batch: &Batch| classification(&model.logits(&batch.input)?, &batch.target);
    let (mut step_modes, mut eval_modes) = (Vec::new(), Vec::new());
    let history = Trainer::new(3)
        .quiet()
        .fit(
            Run::new(&model, &mut optimizer),
            |_epoch| Ok(loader.epoch()),
            |batch: Batch, optimizer| {
                step_modes.push(model.training());
                let (loss, output) = measure(&batch)?;
                optimizer.step(&mut loss.backward()?)?;
                Ok(output)
            },
            || {
                eval_modes.push(model.training());
                Ok([measure(&eval).map(|(_, output)| output)])
            },
            |_end| Ok(()),
        )
        .unwrap();
    assert_eq!(step_modes, vec![Some(true); 3 * 8]);
    assert_eq!(eval_modes, vec![Some(false); 3]);
    assert_eq!(model.training(), Some(true));
    let tracked = model.norm.num_batches_tracked.to_vec::<i64>().unwrap();
    assert_eq!(tracked, [3 * 8]);

    let after = {
        let _eval = ModeGuard::eval(&model);
        let _guard = rumus::no_grad();
        measure(&eval).unwrap().1.loss
    };
    // 16 examples: the trainer's sum of 16 times the mean, divided by 16, is exact.
    assert_eq!(history.last().unwrap().eval.mean_loss(), after);
    // In training mode the same pass gives other numbers (dropout, batch statistics): the
    // comparison above can tell the modes apart.
    let training = {
        let _guard = rumus::no_grad();
        measure(&eval).unwrap().1.loss
    };
    assert_ne!(training, after);
}

/// On one thread, so that no reduction order can differ between the runs.
fn one_thread<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(f)
}

#[test]
fn a_resumed_run_equals_the_uninterrupted_one_bit_for_bit() {
    let _rng = lock_rng();
    let dir = Scratch::new("trainer-resume");
    const N: usize = 6;
    let full = one_thread(|| train(Trainer::new(N), &dir.join("full.csv"), |_, _| {}));
    assert_eq!(full.history.len(), N);
    let lrs: Vec<f64> = full.history.iter().map(|h| f64::from_bits(h.3)).collect();
    assert!(
        lrs.windows(2).any(|w| w[1] < w[0]),
        "the plateau scheduler cut the rate during the run: {lrs:?}"
    );

    // A run that crashes after epoch 3 but whose last saved checkpoint is from epoch 2: its
    // CSV has a row for epoch 3 that the resumed run must replace, not repeat.
    let saved = dir.join("epoch2.ckpt");
    let partial_csv = dir.join("partial.csv");
    one_thread(|| {
        train(Trainer::new(3), &partial_csv, |epoch, checkpoint| {
            if epoch == 2 {
                checkpoint.save(&saved).unwrap();
            }
        })
    });
    assert_eq!(csv_without_seconds(&partial_csv).len(), 1 + 3);
    let checkpoint = Checkpoint::load(&saved).unwrap();
    assert_eq!(checkpoint.epoch, 2);
    assert!(checkpoint.loop_state.contains_key("scheduler.best"));
    assert!(
        checkpoint.loop_state.contains_key("callback.0.wait"),
        "early stopping's state"
    );

    let resumed = one_thread(|| {
        train(
            Trainer::new(N).resume_from(checkpoint),
            &partial_csv,
            |_, _| {},
        )
    });
    assert_eq!(resumed, full);
}

#[test]
fn resuming_from_a_checkpoint_the_trainer_did_not_write_is_an_error() {
    let _rng = lock_rng();
    let model = Linear::<2, 2>::new().unwrap();
    let mut optimizer = Sgd::new(model.parameters(), SgdConfig::default()).unwrap();
    let checkpoint = Checkpoint::capture(&model, &optimizer, None, 1, 0).unwrap();
    let err = Trainer::new(2)
        .quiet()
        .resume_from(checkpoint)
        .fit(
            Run::new(&model, &mut optimizer),
            |_| Ok(Vec::<rumus::Result<()>>::new()),
            |_, _| Ok(StepOutput::loss(0.0, 0)),
            || Ok(Vec::new()),
            |_| Ok(()),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("holds no training history"), "{err}");
}

// ---------------------------------------------------------------------------------------
// Early stopping and callbacks, on scripted metrics.

/// A batch of `count` examples with mean loss `loss` whose two-class scores put `correct` of
/// them in their class.
fn scored(loss: f64, correct: usize, count: usize) -> StepOutput {
    let scores: Vec<f32> = (0..count).flat_map(|_| [1.0, 0.0]).collect();
    let labels: Vec<i64> = (0..count).map(|i| i64::from(i >= correct)).collect();
    StepOutput {
        loss,
        count,
        prediction: Some((
            DynTensor::from_vec(scores, &[count, 2]).unwrap(),
            DynTensor::from_vec(labels, &[count]).unwrap(),
        )),
    }
}

/// Runs up to `epochs` epochs without batches whose evaluation returns `scripted[epoch - 1]`
/// (a mean loss and an accuracy out of 100), with `trainer`'s settings and accuracy.
fn scripted(trainer: Trainer, scripted: &[(f64, usize)]) -> rumus::Result<Vec<EpochSummary>> {
    let _rng = lock_rng(); // initialising the model draws from the process-wide generator
    let model = Linear::<2, 2>::new()?;
    let mut optimizer = Sgd::new(model.parameters(), SgdConfig::default())?;
    let mut epoch = 0;
    trainer.quiet().metric(Accuracy::new()).fit(
        Run::new(&model, &mut optimizer),
        |_| Ok(Vec::<rumus::Result<()>>::new()),
        |_, _| Ok(StepOutput::loss(0.0, 0)),
        || {
            let (loss, correct) = scripted[epoch];
            epoch += 1;
            Ok([Ok(scored(loss, correct, 100))])
        },
        |_| Ok(()),
    )
}

fn eval_losses(history: &[EpochSummary]) -> Vec<f64> {
    history.iter().map(|s| s.eval.mean_loss()).collect()
}

/// Lightning's rule, traced by hand: an improvement beats the best by more than
/// `min_delta`; `patience` non-improving epochs in a row stop the run.
/// patience 3, min_delta 0.05, losses 1.0 0.8 0.78 0.9 0.7 0.69 0.66 0.68 0.1 0.1:
/// e1 best 1.0; e2 0.8 < 0.95: best 0.8; e3 0.78 (not < 0.75): wait 1; e4: wait 2;
/// e5 0.7 < 0.75: best 0.7, wait 0; e6 0.69, e7 0.66 (not < 0.65), e8 0.68: wait 1, 2, 3:
/// stop after epoch 8, before the 0.1s.
#[test]
fn early_stopping_on_a_falling_loss_keeps_the_history() {
    let losses = [1.0, 0.8, 0.78, 0.9, 0.7, 0.69, 0.66, 0.68, 0.1, 0.1];
    let script: Vec<(f64, usize)> = losses.iter().map(|&l| (l, 50)).collect();
    let rule = EarlyStopping::new(Monitor::EVAL_LOSS)
        .patience(3)
        .min_delta(0.05);
    let history = scripted(Trainer::new(10).early_stopping(rule), &script).unwrap();
    assert_eq!(
        history.iter().map(|s| s.epoch).collect::<Vec<_>>(),
        (1..=8).collect::<Vec<_>>()
    );
    // The trainer keeps the sum over the 100 examples; the mean divides it back.
    let expected: Vec<f64> = losses[..8].iter().map(|&l| l * 100.0 / 100.0).collect();
    assert_eq!(eval_losses(&history), expected);
}

/// Mode max on accuracy, patience 1: 0.5, 0.6 (best), 0.6 (no improvement: wait 1 = patience)
/// stops after epoch 3. A NaN loss stops at once, as Lightning's `check_finite`.
#[test]
fn early_stopping_on_a_rising_accuracy_and_on_nan() {
    let script = [(1.0, 50), (1.0, 60), (1.0, 60), (1.0, 90)];
    let rule = EarlyStopping::new(Monitor::EVAL_ACCURACY).patience(1);
    let history = scripted(Trainer::new(4).early_stopping(rule), &script).unwrap();
    assert_eq!(history.len(), 3);

    let script = [(1.0, 50), (f64::NAN, 50), (0.5, 50)];
    let rule = EarlyStopping::new(Monitor::EVAL_LOSS).patience(10);
    let history = scripted(Trainer::new(3).early_stopping(rule), &script).unwrap();
    assert_eq!(history.len(), 2);
    assert!(history[1].eval.mean_loss().is_nan());

    let rule = EarlyStopping::new(Monitor::EVAL_LOSS).min_delta(-1.0);
    let err = scripted(Trainer::new(3).early_stopping(rule), &script).unwrap_err();
    assert!(err.to_string().contains("min_delta is -1"), "{err}");
}

/// The end-of-epoch callback steps a scheduler and saves a checkpoint with the optimizer
/// and scheduler it is lent; a per-batch scheduler lives in the step closure; `stop()` ends
/// the run.
#[test]
fn callbacks_use_the_lent_optimizer_and_scheduler() {
    let _rng = lock_rng();
    let dir = Scratch::new("trainer-callbacks");
    let model = Linear::<2, 2>::new().unwrap();
    let mut optimizer = Sgd::new(
        model.parameters(),
        SgdConfig {
            lr: 1.0,
            ..SgdConfig::default()
        },
    )
    .unwrap();
    // Per epoch, through the trainer: halve every epoch.
    let mut per_epoch = LrScheduler::new(
        &mut optimizer,
        StepLr {
            step_size: 1,
            gamma: 0.5,
        },
    );
    let x = DynTensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], &[2, 2]).unwrap();
    let y = DynTensor::from_vec(vec![0i64, 1], &[2]).unwrap();
    let mut seen_lrs = Vec::new();
    let saved = dir.join("epoch2.ckpt");
    let history = Trainer::new(5)
        .quiet()
        .fit(
            Run::new(&model, &mut optimizer).scheduler(&mut per_epoch),
            |_| Ok([Ok(()), Ok(())]),
            |(), optimizer| {
                seen_lrs.push(optimizer.lrs()[0]);
                let (loss, output) = classification(&model.forward_dyn(&x)?, &y)?;
                optimizer.step(&mut loss.backward()?)?;
                Ok(output)
            },
            || Ok([Ok(StepOutput::loss(1.0, 2))]),
            |end| {
                let scheduler = end.scheduler.as_deref().expect("the run's scheduler");
                assert_eq!(scheduler.epoch(), end.summary.epoch as u64);
                if end.summary.epoch == 2 {
                    end.checkpoint()?.save(&saved)?;
                    // Set a rate by hand for epoch 3 (a scheduler would do the same).
                    end.optimizer.set_lrs(&[0.1]);
                }
                if end.summary.epoch == 3 {
                    end.stop();
                }
                Ok(())
            },
        )
        .unwrap();
    assert_eq!(history.len(), 3, "stop() after epoch 3");
    // Two batches an epoch: 1.0 (epoch 1), 0.5 (epoch 2), then the callback's 0.1.
    assert_eq!(seen_lrs, [1.0, 1.0, 0.5, 0.5, 0.1, 0.1]);
    assert_eq!(
        history.iter().map(|s| s.lr).collect::<Vec<_>>(),
        [1.0, 0.5, 0.1]
    );
    let checkpoint = Checkpoint::load(&saved).unwrap();
    assert_eq!((checkpoint.epoch, checkpoint.step), (2, 4));
    assert_eq!(checkpoint.scheduler_epoch, Some(2));
    assert_eq!(checkpoint.optimizer.lrs, [0.25], "the rate set for epoch 3");
}

// ---------------------------------------------------------------------------------------
// Logs.

#[test]
fn the_csv_has_a_row_per_epoch_as_soon_as_the_epoch_ends() {
    let _rng = lock_rng();
    let dir = Scratch::new("trainer-csv");
    let path = dir.join("metrics.csv");
    let model = Linear::<2, 2>::new().unwrap();
    let mut optimizer = Sgd::new(model.parameters(), SgdConfig::default()).unwrap();
    let losses = [2.5, 1.25, 0.625];
    let mut epoch = 0;
    let mut rows_seen = Vec::new();
    let mut trainer = Trainer::new(3).quiet().csv(&path).metric(Accuracy::new());
    let header = trainer.csv_header();
    let history = trainer
        .fit(
            Run::new(&model, &mut optimizer),
            |_| Ok([Ok(())]),
            |(), _| Ok(scored(4.0, 3, 4)),
            || {
                epoch += 1;
                Ok([Ok(scored(losses[epoch - 1], epoch, 10))])
            },
            |end| {
                let text = std::fs::read_to_string(&path).unwrap();
                rows_seen.push(text.lines().count() - 1);
                assert_eq!(end.history.len(), end.summary.epoch);
                Ok(())
            },
        )
        .unwrap();
    assert_eq!(
        rows_seen,
        [1, 2, 3],
        "each row is in the file when its epoch ends"
    );
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], header);
    assert_eq!(
        header,
        "epoch,train_loss,train_accuracy,eval_loss,eval_accuracy,lr,seconds"
    );
    for (i, line) in lines[1..].iter().enumerate() {
        let cells: Vec<f64> = line.split(',').map(|c| c.parse().unwrap()).collect();
        let epoch = i + 1;
        // Train: mean loss 4, 3 of 4 correct; eval: the scripted loss, `epoch` of 10; the
        // SGD default rate 0.01.
        assert_eq!(
            cells[..6],
            [
                epoch as f64,
                4.0,
                0.75,
                losses[i],
                epoch as f64 / 10.0,
                0.01
            ]
        );
        assert_eq!(cells[6], history[i].seconds);
    }
}

/// CRC-32C bit by bit, independent of the library's table: reflected polynomial
/// 0x82F63B78, initial and final XOR 0xFFFFFFFF.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// TFRecord's masking of a CRC (tensorflow/core/lib/hash/crc32c.h).
fn masked(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xA282_EAD8)
}

/// A protobuf field: its number and its value, by wire type.
#[derive(Debug)]
enum Field {
    Varint(u64),
    Fixed64([u8; 8]),
    Bytes(Vec<u8>),
    Fixed32([u8; 4]),
}

/// Decodes a protobuf message into its fields, per the wire-format documentation.
fn fields(mut bytes: &[u8]) -> Vec<(u64, Field)> {
    fn varint(bytes: &mut &[u8]) -> u64 {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = bytes[0];
            *bytes = &bytes[1..];
            value |= u64::from(b & 0x7F) << shift;
            if b & 0x80 == 0 {
                break;
            }
        }
        value
    }
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let key = varint(&mut bytes);
        let (number, field) = (
            key >> 3,
            match key & 7 {
                0 => Field::Varint(varint(&mut bytes)),
                1 => {
                    let (head, rest) = bytes.split_at(8);
                    bytes = rest;
                    Field::Fixed64(head.try_into().unwrap())
                }
                2 => {
                    let len = varint(&mut bytes) as usize;
                    let (head, rest) = bytes.split_at(len);
                    bytes = rest;
                    Field::Bytes(head.to_vec())
                }
                5 => {
                    let (head, rest) = bytes.split_at(4);
                    bytes = rest;
                    Field::Fixed32(head.try_into().unwrap())
                }
                other => panic!("wire type {other}"),
            },
        );
        out.push((number, field));
    }
    out
}

#[test]
fn tensorboard_events_decode_with_valid_crcs_and_the_epoch_values() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283, "the CRC-32C check value");
    let dir = Scratch::new("trainer-tensorboard");
    let script = [(2.0, 10), (1.5, 40), (0.75, 80)];
    let history = scripted(Trainer::new(3).tensorboard(dir.join("runs")), &script).unwrap();
    let files: Vec<_> = std::fs::read_dir(dir.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1);
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("events.out.tfevents."), "{name}");
    let bytes = std::fs::read(&files[0]).unwrap();

    // TFRecords: length, masked CRC of the length, data, masked CRC of the data.
    let mut records = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let len = u64::from_le_bytes(rest[..8].try_into().unwrap()) as usize;
        let len_crc = u32::from_le_bytes(rest[8..12].try_into().unwrap());
        assert_eq!(len_crc, masked(crc32c(&rest[..8])), "length CRC");
        let data = &rest[12..12 + len];
        let data_crc = u32::from_le_bytes(rest[12 + len..16 + len].try_into().unwrap());
        assert_eq!(data_crc, masked(crc32c(data)), "data CRC");
        records.push(fields(data));
        rest = &rest[16 + len..];
    }
    assert_eq!(
        records.len(),
        1 + 3,
        "the version event, then one per epoch"
    );
    let version = records[0]
        .iter()
        .find_map(|(n, f)| match (n, f) {
            (3, Field::Bytes(b)) => Some(String::from_utf8(b.clone()).unwrap()),
            _ => None,
        })
        .expect("file_version");
    assert_eq!(version, "brain.Event:2");
    for (event, summary) in records[1..].iter().zip(&history) {
        let mut step = None;
        let mut scalars = Vec::new();
        for (number, field) in event {
            match (number, field) {
                (1, Field::Fixed64(t)) => assert!(f64::from_le_bytes(*t) > 1.5e9, "wall_time"),
                (2, Field::Varint(s)) => step = Some(*s),
                (5, Field::Bytes(summary)) => {
                    for (n, value) in fields(summary) {
                        let (1, Field::Bytes(value)) = (n, value) else {
                            panic!("Summary.value")
                        };
                        let value = fields(&value);
                        let tag = match &value[0] {
                            (1, Field::Bytes(t)) => String::from_utf8(t.clone()).unwrap(),
                            other => panic!("Value.tag: {other:?}"),
                        };
                        let simple = match &value[1] {
                            (2, Field::Fixed32(v)) => f32::from_le_bytes(*v),
                            other => panic!("Value.simple_value: {other:?}"),
                        };
                        scalars.push((tag, simple));
                    }
                }
                other => panic!("unexpected Event field {other:?}"),
            }
        }
        assert_eq!(step, Some(summary.epoch as u64));
        // No training batches: a loss of 0 over nothing, and an accuracy of nothing (NaN).
        let expected = [
            ("train/loss", 0.0),
            ("train/accuracy", f32::NAN),
            ("eval/loss", summary.eval.mean_loss() as f32),
            ("eval/accuracy", summary.eval.accuracy() as f32),
            ("lr", 0.01),
        ];
        let bits = |pairs: Vec<(String, f32)>| -> Vec<(String, Option<u32>)> {
            pairs
                .into_iter()
                .map(|(t, v)| (t, (!v.is_nan()).then(|| v.to_bits())))
                .collect()
        };
        let expected = expected.iter().map(|(t, v)| (t.to_string(), *v)).collect();
        assert_eq!(bits(scalars), bits(expected));
    }
    assert_eq!(
        history
            .iter()
            .map(|s| s.eval.mean_loss() as f32)
            .collect::<Vec<_>>(),
        [2.0, 1.5, 0.75]
    );
}

// ---------------------------------------------------------------------------------------
// Curves.

/// A decoded RGB(A) image.
struct Image {
    width: usize,
    height: usize,
    channels: usize,
    pixels: Vec<u8>,
}

impl Image {
    fn read(path: &Path) -> Image {
        let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut pixels).unwrap();
        pixels.truncate(info.buffer_size());
        Image {
            width: info.width as usize,
            height: info.height as usize,
            channels: info.color_type.samples(),
            pixels,
        }
    }

    fn rgb(&self, x: usize, y: usize) -> (u8, u8, u8) {
        let i = (y * self.width + x) * self.channels;
        (self.pixels[i], self.pixels[i + 1], self.pixels[i + 2])
    }

    /// Pixels of `color` in the columns `xs` and rows `ys`.
    fn count(
        &self,
        xs: std::ops::Range<usize>,
        ys: std::ops::Range<usize>,
        pick: impl Fn((u8, u8, u8)) -> bool,
    ) -> usize {
        ys.flat_map(|y| xs.clone().map(move |x| (x, y)))
            .filter(|&(x, y)| pick(self.rgb(x, y)))
            .count()
    }
}

/// A phase of `count` examples with mean loss `loss` and accuracy `accuracy`.
fn phase(loss: f64, accuracy: f64, count: usize) -> PhaseSummary {
    PhaseSummary {
        loss_sum: loss * count as f64,
        count,
        values: vec![("accuracy".into(), accuracy)],
    }
}

fn history_of(values: &[(f64, f64, f64, f64)]) -> Vec<EpochSummary> {
    values
        .iter()
        .enumerate()
        .map(|(i, &(tl, ta, el, ea))| EpochSummary {
            epoch: i + 1,
            train: phase(tl, ta, 100),
            eval: phase(el, ea, 100),
            lr: 0.01,
            seconds: 1.0,
        })
        .collect()
}

#[test]
fn the_curves_have_two_panels_with_lines_text_and_legends() {
    let dir = Scratch::new("trainer-curve");
    let path = dir.join("curve.png");
    let history = history_of(&[
        (2.3, 0.10, 2.2, 0.12),
        (1.2, 0.60, 1.3, 0.55),
        (0.7, 0.80, 0.8, 0.75),
        (0.4, 0.90, 0.6, 0.82),
        (0.3, 0.93, 0.55, 0.84),
        (0.2, 0.95, 0.5, 0.85),
    ]);
    write_curve(&history, &path).unwrap();
    if let Some(keep) = std::env::var_os("RUMUS_KEEP_CURVE") {
        std::fs::copy(&path, keep).unwrap();
    }
    let image = Image::read(&path);
    assert_eq!((image.width as u32, image.height as u32), CURVE_SIZE);
    let (w, h) = (image.width, image.height);
    let color = |(r, g, b): (u8, u8, u8)| move |p: (u8, u8, u8)| p == (r, g, b);
    let dark = |(r, g, b): (u8, u8, u8)| r < 100 && g < 100 && b < 100;
    for (panel, xs) in [("loss", 0..w / 2), ("accuracy", w / 2..w)] {
        for (line, rgb) in [("train", TRAIN_COLOR), ("eval", EVAL_COLOR)] {
            let n = image.count(xs.clone(), 0..h, color(rgb));
            assert!(
                n > 500,
                "{panel} panel: {line} line has {n} pixels of its colour"
            );
        }
        // Axis lines, ticks, tick labels, axis labels and the caption are dark.
        let n = image.count(xs.clone(), 40..h, dark);
        assert!(
            n > 2000,
            "{panel} panel has {n} dark pixels (axes and text)"
        );
        // Tick labels under the x axis: dark pixels in the bottom band, beside the axis.
        let n = image.count(xs.clone(), h - 45..h, dark);
        assert!(
            n > 100,
            "{panel} panel: {n} dark pixels of x tick labels and axis label"
        );
    }
    // The title over both panels.
    let n = image.count(w / 3..2 * w / 3, 0..35, dark);
    assert!(n > 100, "the title has {n} dark pixels");
    // The loss falls, so the train line is high on the left and low on the right of its
    // panel (rows grow downwards).
    let rows = |xs: std::ops::Range<usize>| {
        let ys: Vec<usize> = (0..h)
            .filter(|&y| xs.clone().any(|x| image.rgb(x, y) == TRAIN_COLOR))
            .collect();
        ys.iter().sum::<usize>() as f64 / ys.len().max(1) as f64
    };
    // Columns left of the legend (upper right).
    assert!(rows(90..150) < rows(300..360), "the loss line falls");
}

#[test]
fn a_curve_that_cannot_be_written_is_an_error_naming_the_file() {
    let path = Path::new("/nonexistent-dir/curve.png");
    let err = write_curve(&history_of(&[(1.0, 0.5, 1.0, 0.5)]), path)
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent-dir/curve.png"), "{err}");
}

#[test]
fn the_console_line_names_its_numbers_as_the_csv_header_does() {
    let summary = EpochSummary {
        epoch: 3,
        train: phase(0.5, 0.75, 4),
        eval: phase(1.25, 0.125, 8),
        lr: 0.01,
        seconds: 2.0,
    };
    let line = summary.to_string();
    let pairs: Vec<(&str, f64)> = line
        .split_whitespace()
        .filter_map(|word| word.split_once('='))
        .map(|(name, value)| (name, value.parse().unwrap()))
        .collect();
    let header = Trainer::new(1).metric(Accuracy::new()).csv_header();
    let expected_names: Vec<&str> = header.split(',').skip(1).take(5).collect();
    let names: Vec<&str> = pairs.iter().map(|&(name, _)| name).collect();
    assert_eq!(names, expected_names, "{line}");
    let values: Vec<f64> = pairs.iter().map(|&(_, value)| value).collect();
    assert_eq!(values, [0.5, 0.75, 1.25, 0.125, 0.01], "{line}");
    assert!(line.starts_with("epoch   3  "), "{line}");
}
