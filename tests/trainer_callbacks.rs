//! `Trainer`'s callbacks and options against independent truths: gradient accumulation
//! equals training on the concatenated batches, clipping makes the step exactly as long as
//! the limit in the gradient's direction, a run resumed from a mid-epoch checkpoint equals
//! the uninterrupted run bit for bit, the best-k files are the k best of a scripted run,
//! the learning-rate log follows a halving schedule, metrics reach the logs under their
//! names, and autocast is on exactly while the steps and the evaluation run.

mod common;

use std::sync::{Mutex, MutexGuard};

use common::scratch::Scratch;
use rumus::data::{Batch, Collate, DataLoader, Dataset, Features, InMemory, Sample};
use rumus::io::Checkpoint;
use rumus::nn::StateDict;
use rumus::nn::functional::dropout;
use rumus::optim::{Adam, AdamConfig, LrScheduler, Sgd, SgdConfig, StepLr};
use rumus::prelude::*;
use rumus::rng::Generator;
use rumus::train::{
    Accuracy, EpochSummary, F1Score, KeepBest, LearningRateLog, Metric, Monitor, Run,
    SaveCheckpoints, StepOutput, Trainer, classification,
};

/// Tests that draw from the process-wide generator hold this lock.
static GLOBAL_RNG: Mutex<()> = Mutex::new(());

fn lock_rng() -> MutexGuard<'static, ()> {
    GLOBAL_RNG.lock().unwrap_or_else(|p| p.into_inner())
}

/// Each parameter's name and the bits of its values.
type ParameterBits = Vec<(String, Vec<u64>)>;

fn bits(state: &StateDict) -> ParameterBits {
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

fn values(model: &dyn Module) -> Vec<f64> {
    let state = model.state_dict().unwrap();
    state.iter().flat_map(|(_, t)| t.to_f64_vec()).collect()
}

/// `n` labelled samples of 4 features in 3 classes.
fn samples(n: usize, seed: u64) -> Vec<Sample> {
    let mut g = Generator::new(seed);
    (0..n)
        .map(|_| {
            let x: Vec<f32> = (0..4).map(|_| g.next_normal() as f32).collect();
            Sample::classified(Features::vector(x), g.below(3) as i64)
        })
        .collect()
}

fn batch(samples: &[Sample]) -> Batch {
    Sample::collate(samples.to_vec()).unwrap()
}

/// SGD on `Linear<4, 3>` from a fixed start.
fn linear_and_sgd(lr: f64) -> (Linear<4, 3>, Sgd) {
    let model = Linear::<4, 3>::new().unwrap();
    let mut g = Generator::new(1);
    let mut state = model.state_dict().unwrap();
    for (_, t) in state.iter_mut() {
        let v: Vec<f32> = (0..t.numel()).map(|_| g.next_normal() as f32).collect();
        *t = DynTensor::from_vec(v, t.dims()).unwrap();
    }
    model.load_state_dict(&state).unwrap();
    let config = SgdConfig {
        lr,
        ..SgdConfig::default()
    };
    let optimizer = Sgd::new(model.parameters(), config).unwrap();
    (model, optimizer)
}

/// Trains one epoch on `batches` and returns the parameters.
fn one_epoch(trainer: Trainer, batches: Vec<Batch>, lr: f64) -> Vec<f64> {
    let (model, mut optimizer) = linear_and_sgd(lr);
    let mut trainer = trainer.quiet();
    trainer
        .fit(
            Run::new(&model, &mut optimizer),
            |_| Ok(batches.clone().into_iter().map(Ok)),
            |b: Batch, optimizer| {
                let (loss, output) = classification(&model.forward_dyn(&b.input)?, &b.target)?;
                optimizer.step(&mut loss.backward()?)?;
                Ok(output)
            },
            || Ok(Vec::new()),
            |_| Ok(()),
        )
        .unwrap();
    values(&model)
}

/// Batches of 4 accumulated in pairs step as batches of 8 do (the mean loss over 8 is the
/// mean of the two means over 4); an epoch of 3 batches steps once more at its end, with the
/// lone batch's gradient, as a batch of 4 would.
#[test]
fn accumulated_gradients_equal_the_concatenated_batches() {
    let _rng = lock_rng();
    let data = samples(12, 5);
    let quarters: Vec<Batch> = data.chunks(4).map(batch).collect();
    let accumulated = one_epoch(
        Trainer::new(1).accumulate_gradients(2).unwrap(),
        quarters,
        0.5,
    );
    let direct = one_epoch(
        Trainer::new(1),
        vec![batch(&data[..8]), batch(&data[8..])],
        0.5,
    );
    for (a, d) in accumulated.iter().zip(&direct) {
        assert!((a - d).abs() < 1e-6, "{accumulated:?}\nvs\n{direct:?}");
    }
    assert!(Trainer::new(1).accumulate_gradients(0).is_err());
}

/// With the norm clipped to 0.01 and a rate of 1, the step moves the parameters by exactly
/// 0.01 (less PyTorch's 1e-6 guard) along minus the gradient, measured by a backward pass
/// of its own.
#[test]
fn clipping_makes_the_step_as_long_as_the_limit() {
    let _rng = lock_rng();
    let data = batch(&samples(8, 6));
    let (model, _) = linear_and_sgd(1.0);
    let (loss, _) = classification(&model.forward_dyn(&data.input).unwrap(), &data.target).unwrap();
    let grads = loss.backward().unwrap();
    let gradient: Vec<f64> = model
        .parameters()
        .iter()
        .flat_map(|p| grads.grad(p).unwrap().to_f64_vec())
        .collect();
    let norm = gradient.iter().map(|g| g * g).sum::<f64>().sqrt();
    assert!(
        norm > 0.01,
        "the gradient ({norm}) is longer than the limit"
    );
    let before = values(&model);
    let after = one_epoch(
        Trainer::new(1).clip_grad_norm(0.01).unwrap(),
        vec![data],
        1.0,
    );
    // `values` lists the state dict's tensors in `parameters()` order (weight, bias).
    let scale = 0.01 / (norm + 1e-6);
    for ((b, a), g) in before.iter().zip(&after).zip(&gradient) {
        assert!(
            (a - (b - scale * g)).abs() < 1e-6,
            "{a} vs {}",
            b - scale * g
        );
    }
    let err = Trainer::new(1)
        .clip_grad_norm(-1.0)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("max_norm is -1"), "{err}");
}

#[model]
struct Mlp {
    fc1: Linear<4, 8>,
    fc2: Linear<8, 3>,
}

/// 40 samples with noise from each item's generator on every read.
fn noisy_data() -> impl Dataset<Item = Sample> {
    InMemory::new(samples(40, 9)).map_random(|mut sample: Sample, rng: &mut Generator| {
        for v in &mut sample.input.values {
            *v += 0.05 * rng.next_normal() as f32;
        }
        Ok(sample)
    })
}

/// Trains the MLP (dropout, Adam, a shuffling loader) for `trainer`'s epochs of 5 batches
/// with a checkpoint every `every` batches; `fail_at` makes the step of that global batch
/// fail (a crash).
fn run_with_step_checkpoints(
    trainer: Trainer,
    (path, every): (&std::path::Path, u64),
    fail_at: Option<u64>,
) -> rumus::Result<(Vec<EpochSummary>, ParameterBits)> {
    rumus::manual_seed(21);
    let model = Mlp::new()?;
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam())?;
    if trainer.resume.is_some() {
        rumus::manual_seed(999); // the checkpoint's generator must be the one used
    }
    let mut loader = DataLoader::new(noisy_data(), 8)?.shuffle(3);
    let eval = batch(&samples(16, 10));
    let mut step = 0;
    let logits = |x: &DynTensor, training: bool| -> rumus::Result<DynTensor> {
        let h = model.fc1.forward_dyn(x)?.relu()?;
        model.fc2.forward_dyn(&dropout(&h, 0.2, training)?)
    };
    let mut trainer = trainer
        .quiet()
        .callback(SaveCheckpoints::every_steps(path, every)?);
    let history = trainer.fit(
        Run::new(&model, &mut optimizer),
        |epoch| Ok(loader.epoch_from(epoch as u64 - 1, 0)),
        |b: Batch, optimizer| {
            step += 1;
            if Some(step) == fail_at {
                return Err(rumus::Error::InvalidArgument {
                    op: "test",
                    message: "the machine went away".into(),
                });
            }
            let (loss, output) = classification(&logits(&b.input, true)?, &b.target)?;
            optimizer.step(&mut loss.backward()?)?;
            Ok(output)
        },
        || Ok([classification(&logits(&eval.input, false)?, &eval.target).map(|(_, o)| o)]),
        |_| Ok(()),
    )?;
    Ok((history, bits(&model.state_dict()?)))
}

fn without_seconds(history: Vec<EpochSummary>) -> Vec<EpochSummary> {
    history
        .into_iter()
        .map(|s| EpochSummary { seconds: 0.0, ..s })
        .collect()
}

/// The crash comes at batch 11 (epoch 3's first); the last checkpoint is from batch 8, three
/// batches into epoch 2. The resumed run skips those three and ends where the uninterrupted
/// run does, parameters, losses and all.
#[test]
fn a_run_resumed_from_a_mid_epoch_checkpoint_equals_the_uninterrupted_one() {
    let _rng = lock_rng();
    let dir = Scratch::new("trainer-mid-epoch");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let full_path = dir.join("full.ckpt");
    let (full_history, full_model) = pool
        .install(|| run_with_step_checkpoints(Trainer::new(3), (&full_path, 4), None))
        .unwrap();

    let path = dir.join("crash.ckpt");
    let crashed = pool.install(|| run_with_step_checkpoints(Trainer::new(3), (&path, 4), Some(11)));
    let err = crashed.unwrap_err().to_string();
    assert!(err.contains("the machine went away"), "{err}");
    let checkpoint = Checkpoint::load(&path).unwrap();
    assert_eq!((checkpoint.epoch, checkpoint.step), (1, 8));
    assert_eq!(checkpoint.loop_state["epoch.batches"], "3");

    let resumed = Trainer::new(3).resume_from(checkpoint);
    let (history, model) = pool
        .install(|| run_with_step_checkpoints(resumed, (&path, 4), None))
        .unwrap();
    assert_eq!(without_seconds(history), without_seconds(full_history));
    assert_eq!(model, full_model);
}

/// Accumulating pairs of batches, a save asked for at batch 5 (an epoch's last, its
/// gradient still waiting for a partner) waits for the epoch's closing step; the run resumed
/// from it skips the whole epoch's batches, evaluates it and goes on as the uninterrupted run.
#[test]
fn a_save_asked_for_mid_accumulation_waits_for_the_step_and_resumes_exactly() {
    let _rng = lock_rng();
    let dir = Scratch::new("trainer-accumulated-save");
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let trainer = || Trainer::new(2).accumulate_gradients(2).unwrap();
    let full_path = dir.join("full.ckpt");
    let (full_history, full_model) = pool
        .install(|| run_with_step_checkpoints(trainer(), (&full_path, 5), None))
        .unwrap();
    let path = dir.join("crash.ckpt");
    let crashed = pool.install(|| run_with_step_checkpoints(trainer(), (&path, 5), Some(7)));
    assert!(crashed.is_err());
    let checkpoint = Checkpoint::load(&path).unwrap();
    assert_eq!((checkpoint.epoch, checkpoint.step), (0, 5));
    assert_eq!(checkpoint.loop_state["epoch.batches"], "5");
    let resumed = trainer().resume_from(checkpoint);
    let (history, model) = pool
        .install(|| run_with_step_checkpoints(resumed, (&path, 5), None))
        .unwrap();
    assert_eq!(without_seconds(history), without_seconds(full_history));
    assert_eq!(model, full_model);
}

/// Runs epochs without training batches whose evaluation loss is `losses[epoch - 1]`.
fn scripted(trainer: Trainer, losses: &[f64]) -> rumus::Result<Vec<EpochSummary>> {
    let _rng = lock_rng();
    let model = Linear::<2, 2>::new()?;
    let mut optimizer = Sgd::new(model.parameters(), SgdConfig::default())?;
    let mut epoch = 0;
    let mut trainer = trainer.quiet();
    trainer.fit(
        Run::new(&model, &mut optimizer),
        |_| Ok(Vec::<rumus::Result<()>>::new()),
        |_, _| Ok(StepOutput::loss(0.0, 0)),
        || {
            epoch += 1;
            Ok([Ok(StepOutput::loss(losses[epoch - 1], 10))])
        },
        |_| Ok(()),
    )
}

#[test]
fn keep_best_keeps_the_k_best_epochs_files_and_no_others() {
    let dir = Scratch::new("trainer-keep-best");
    let keep = KeepBest::new(dir.join("best"), Monitor::EVAL_LOSS, 2).unwrap();
    let kept = keep.kept();
    let losses = [3.0, 1.0, 2.0, 0.5, 4.0];
    scripted(Trainer::new(5).callback(keep), &losses).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(dir.join("best"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "epoch=2-eval_loss=1.0000.ckpt",
            "epoch=4-eval_loss=0.5000.ckpt"
        ]
    );
    let (best, loss) = kept.best().unwrap();
    assert_eq!(loss, 0.5);
    assert_eq!(Checkpoint::load(&best).unwrap().epoch, 4);
    assert_eq!(kept.all().len(), 2);
    assert!(KeepBest::new(dir.join("x"), Monitor::EVAL_LOSS, 0).is_err());
}

#[test]
fn monitoring_a_metric_the_trainer_does_not_measure_is_an_error_naming_both() {
    let rule = rumus::train::EarlyStopping::new(Monitor::eval("f1"));
    let err = scripted(
        Trainer::new(2).metric(Accuracy::new()).early_stopping(rule),
        &[1.0, 1.0],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("`eval_f1` is monitored"), "{err}");
    assert!(err.contains("loss, accuracy"), "{err}");
}

/// A per-epoch halving, two batches an epoch: the log has each batch's next rate.
#[test]
fn the_learning_rate_log_has_every_steps_rate() {
    let _rng = lock_rng();
    let dir = Scratch::new("trainer-lr-log");
    let path = dir.join("lr.csv");
    let model = Linear::<2, 2>::new().unwrap();
    let config = SgdConfig {
        lr: 1.0,
        ..SgdConfig::default()
    };
    let mut optimizer = Sgd::new(model.parameters(), config).unwrap();
    let halving = StepLr {
        step_size: 1,
        gamma: 0.5,
    };
    let mut scheduler = LrScheduler::new(&mut optimizer, halving);
    let x = DynTensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], &[2, 2]).unwrap();
    let y = DynTensor::from_vec(vec![0i64, 1], &[2]).unwrap();
    Trainer::new(3)
        .quiet()
        .callback(LearningRateLog::csv(&path))
        .fit(
            Run::new(&model, &mut optimizer).scheduler(&mut scheduler),
            |_| Ok([Ok(()), Ok(())]),
            |(), optimizer| {
                let (loss, output) = classification(&model.forward_dyn(&x)?, &y)?;
                optimizer.step(&mut loss.backward()?)?;
                Ok(output)
            },
            || Ok(Vec::new()),
            |_| Ok(()),
        )
        .unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let expected = "step,epoch,lr_0\n1,1,1\n2,1,1\n3,2,0.5\n4,2,0.5\n5,3,0.25\n6,3,0.25\n";
    assert_eq!(text, expected);
}

/// F1 and accuracy go into the CSV header and the summaries under `train_`/`eval_`, with
/// the values a metric fed the same batch computes.
#[test]
fn metrics_reach_the_logs_under_their_names() {
    let _rng = lock_rng();
    let dir = Scratch::new("trainer-metric-names");
    let csv = dir.join("log.csv");
    let data = batch(&samples(24, 12));
    let (model, mut optimizer) = linear_and_sgd(0.1);
    let mut trainer = Trainer::new(2)
        .quiet()
        .csv(&csv)
        .metric(Accuracy::new())
        .metric(F1Score::macro_average(3));
    let header = trainer.csv_header();
    assert_eq!(
        header,
        "epoch,train_loss,train_accuracy,train_f1,eval_loss,eval_accuracy,eval_f1,lr,seconds"
    );
    let measure = |b: &Batch| classification(&model.forward_dyn(&b.input)?, &b.target);
    let history = trainer
        .fit(
            Run::new(&model, &mut optimizer),
            |_| Ok([Ok(data.clone())]),
            |b: Batch, optimizer| {
                let (loss, output) = measure(&b)?;
                optimizer.step(&mut loss.backward()?)?;
                Ok(output)
            },
            || Ok([measure(&data).map(|(_, o)| o)]),
            |_| Ok(()),
        )
        .unwrap();
    let logits = {
        let _no_grad = rumus::no_grad();
        model.forward_dyn(&data.input).unwrap()
    };
    let mut f1 = F1Score::macro_average(3);
    f1.update(&logits, &data.target).unwrap();
    let last = history.last().unwrap();
    assert_eq!(last.eval.get("f1"), Some(f1.compute()));
    let text = std::fs::read_to_string(&csv).unwrap();
    let row: Vec<f64> = text
        .lines()
        .nth(2)
        .unwrap()
        .split(',')
        .map(|c| c.parse().unwrap())
        .collect();
    assert_eq!(row[5..7], [last.eval.accuracy(), f1.compute()]);
    assert!(last.to_string().contains("eval_f1="), "{last}");
}

/// Autocast is on, in the asked dtype, while the steps and the evaluation run, and off again
/// after `fit`.
#[test]
fn autocast_is_on_while_steps_and_evaluation_run() {
    let _rng = lock_rng();
    let model = Linear::<2, 2>::new().unwrap();
    let mut optimizer = Sgd::new(model.parameters(), SgdConfig::default()).unwrap();
    let seen = std::cell::RefCell::new(Vec::new());
    let mut trainer = Trainer::new(1).quiet().autocast(Some(rumus::DType::BF16));
    trainer
        .fit(
            Run::new(&model, &mut optimizer),
            |_| Ok([Ok(())]),
            |(), _| {
                seen.borrow_mut().push(rumus::amp::autocast_dtype());
                Ok(StepOutput::loss(1.0, 1))
            },
            || {
                seen.borrow_mut().push(rumus::amp::autocast_dtype());
                Ok(Vec::new())
            },
            |_| Ok(()),
        )
        .unwrap();
    assert_eq!(seen.into_inner(), [Some(rumus::DType::BF16); 2]);
    assert_eq!(rumus::amp::autocast_dtype(), None);
}

/// A second `fit` of the same trainer starts early stopping afresh: the first run's best
/// (1.0) would stop the second after its first epoch.
#[test]
fn early_stopping_starts_afresh_on_a_second_fit() {
    let _rng = lock_rng();
    let model = Linear::<2, 2>::new().unwrap();
    let mut optimizer = Sgd::new(model.parameters(), SgdConfig::default()).unwrap();
    let rule = rumus::train::EarlyStopping::new(Monitor::EVAL_LOSS).patience(1);
    let mut trainer = Trainer::new(3).quiet().early_stopping(rule);
    let mut run = |losses: &[f64]| {
        let mut epoch = 0;
        trainer
            .fit(
                Run::new(&model, &mut optimizer),
                |_| Ok(Vec::<rumus::Result<()>>::new()),
                |_, _| Ok(StepOutput::loss(0.0, 0)),
                || {
                    epoch += 1;
                    Ok([Ok(StepOutput::loss(losses[epoch - 1], 10))])
                },
                |_| Ok(()),
            )
            .unwrap()
            .len()
    };
    assert_eq!(run(&[1.0, 2.0, 0.5]), 2, "no improvement at epoch 2 stops");
    assert_eq!(run(&[3.0, 2.5, 2.4]), 3);
}
