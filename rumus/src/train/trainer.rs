//! A training loop for the common case, in the spirit of PyTorch Lightning's `Trainer`;
//! anything it does not fit is a plain loop over the same pieces (`backward`, an optimizer's
//! `step`, the [`Metric`]s). Its parts live beside it: [`EarlyStopping`], the CSV and
//! TensorBoard logs, the curves, and the checkpointed loop state.

use std::path::PathBuf;
use std::time::Instant;

use super::callback::{BatchEnd, Callback, FitStart};
use super::csv_log::CsvLog;
use super::early_stopping::EarlyStopping;
use super::lent_optimizer::LentOptimizer;
use super::loop_state::{self, MidEpoch};
use super::metric::Metric;
use super::phase::PhaseMeter;
use super::run::{EpochEnd, Run};
use super::save_checkpoints::SaveCheckpoints;
use super::step::StepOutput;
use super::summary::EpochSummary;
use super::tensorboard::TensorBoardLog;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::io::Checkpoint;
use crate::nn::{ModeGuard, Module};
use crate::optim::{Optimizer, Scheduler};

/// Runs epochs of training steps, evaluates after each, steps the scheduler, and reports:
/// one summary line per epoch, a progress bar over the batches (on a terminal), a CSV row per
/// epoch, TensorBoard scalars, and the curves at the end. It measures the loss and any
/// [`Metric`]s, runs [`Callback`]s (early stopping, checkpoints, ...), and can accumulate
/// and clip gradients and run under autocast. It can resume from a checkpoint exactly where
/// the run left off.
///
/// ```
/// use rumus::optim::{Sgd, SgdConfig};
/// use rumus::prelude::*;
/// use rumus::train::{Accuracy, Run, Trainer, classification};
///
/// // Two points, two classes, one linear layer.
/// let model = Linear::<2, 2>::new()?;
/// let x = DynTensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], &[2, 2])?;
/// let y = DynTensor::from_vec(vec![0i64, 1], &[2])?;
/// let mut optimizer = Sgd::new(model.parameters(), SgdConfig { lr: 0.5, ..Default::default() })?;
/// let history = Trainer::new(20).quiet().metric(Accuracy::new()).fit(
///     Run::new(&model, &mut optimizer),
///     // The batches of an epoch (1, 2, ...): here one batch; usually a DataLoader epoch.
///     |_epoch| Ok([Ok((x.clone(), y.clone()))]),
///     // One training step; the trainer lends the optimizer.
///     |(x, y): (DynTensor, DynTensor), optimizer| {
///         let (loss, output) = classification(&model.forward_dyn(&x)?, &y)?;
///         optimizer.step(&mut loss.backward()?)?;
///         Ok(output)
///     },
///     // The evaluation after each epoch: its batches' outputs (run without gradients, in
///     // evaluation mode).
///     || Ok([classification(&model.forward_dyn(&x)?, &y).map(|(_, output)| output)]),
///     // After each epoch: `end.checkpoint()?.save(..)`, `end.stop()`, ...
///     |_end| Ok(()),
/// )?;
/// assert_eq!(history.len(), 20);
/// assert_eq!(history.last().unwrap().eval.accuracy(), 1.0);
/// # Ok::<(), rumus::Error>(())
/// ```
pub struct Trainer {
    /// Number of epochs of the whole run (a resumed run trains the ones it lacks).
    pub epochs: usize,
    /// Show a progress bar over each epoch's batches (feature `progress`).
    pub progress: bool,
    /// Print the per-epoch summary line.
    pub verbose: bool,
    /// Where to write the loss and metric curves (feature `plot`).
    pub curve_path: Option<PathBuf>,
    /// Where to write the per-epoch CSV log.
    pub csv_path: Option<PathBuf>,
    /// The directory of the TensorBoard event file.
    pub tensorboard_dir: Option<PathBuf>,
    /// The checkpoint to resume from.
    pub resume: Option<Checkpoint>,
    metrics: Vec<Box<dyn Metric>>,
    callbacks: Vec<Box<dyn Callback>>,
    accumulate: usize,
    clip_norm: Option<f64>,
    autocast: Option<DType>,
}

impl Trainer {
    /// A trainer for `epochs` epochs, with the progress bar and summary lines on, the loss
    /// as its only measure, and no files written.
    pub fn new(epochs: usize) -> Self {
        Trainer {
            epochs,
            progress: true,
            verbose: true,
            curve_path: None,
            csv_path: None,
            tensorboard_dir: None,
            resume: None,
            metrics: Vec::new(),
            callbacks: Vec::new(),
            accumulate: 1,
            clip_norm: None,
            autocast: None,
        }
    }

    /// Measures `metric` on every training and evaluation batch, logged as
    /// `train_<name>` and `eval_<name>` (the steps must report their predictions:
    /// [`StepOutput::new`] or [`classification`](super::classification)).
    pub fn metric(mut self, metric: impl Metric + 'static) -> Self {
        self.metrics.push(Box::new(metric));
        self
    }

    /// Runs `callback` at its hooks, after the callbacks added before it.
    pub fn callback(mut self, callback: impl Callback + 'static) -> Self {
        self.callbacks.push(Box::new(callback));
        self
    }

    /// Writes the loss and metric curves to `path` (PNG) after training (needs the `plot`
    /// feature; without it `fit` fails before the first epoch).
    pub fn curve(mut self, path: impl Into<PathBuf>) -> Self {
        self.curve_path = Some(path.into());
        self
    }

    /// Turns off the progress bar and the summary lines.
    pub fn quiet(mut self) -> Self {
        self.verbose = false;
        self.progress = false;
        self
    }

    /// Logs every epoch to the CSV file `path` (header [`Trainer::csv_header`]), a row as
    /// each epoch ends. A fresh run starts the file anew; a resumed one rewrites the rows of
    /// its checkpoint's history and goes on from there.
    pub fn csv(mut self, path: impl Into<PathBuf>) -> Self {
        self.csv_path = Some(path.into());
        self
    }

    /// Logs every epoch's scalars to a new TensorBoard event file in `dir`
    /// (`tensorboard --logdir dir`): `train/loss`, `train/<metric>`, `eval/...` and `lr`.
    pub fn tensorboard(mut self, dir: impl Into<PathBuf>) -> Self {
        self.tensorboard_dir = Some(dir.into());
        self
    }

    /// Saves a checkpoint to `path` after every epoch (the callback
    /// [`SaveCheckpoints::every_epoch`]), to resume from with [`Trainer::resume_from`].
    pub fn checkpoint(self, path: impl Into<PathBuf>) -> Self {
        self.callback(SaveCheckpoints::every_epoch(path))
    }

    /// Stops training when `rule` says so (the callback itself).
    pub fn early_stopping(self, rule: EarlyStopping) -> Self {
        self.callback(rule)
    }

    /// Steps the optimizer once per `batches` training batches, with their gradients
    /// averaged (Lightning's `accumulate_grad_batches`): the step closure still calls
    /// `optimizer.step(..)` every batch. An epoch whose batch count is not a multiple steps
    /// with what it has at its end.
    pub fn accumulate_gradients(mut self, batches: usize) -> Result<Self> {
        if batches == 0 {
            return Err(Error::InvalidArgument {
                op: "Trainer::accumulate_gradients",
                message: "batches is 0; give how many batches' gradients make one optimizer                           step (1: no accumulation)"
                    .into(),
            });
        }
        self.accumulate = batches;
        Ok(self)
    }

    /// Scales the gradients so their joint L2 norm is at most `max_norm` before each
    /// optimizer step ([`clip_grad_norm`](crate::optim::clip_grad_norm), Lightning's
    /// `gradient_clip_val`).
    pub fn clip_grad_norm(mut self, max_norm: f64) -> Result<Self> {
        if !(max_norm.is_finite() && max_norm > 0.0) {
            return Err(Error::InvalidArgument {
                op: "Trainer::clip_grad_norm",
                message: format!("max_norm is {max_norm}; it must be a finite number > 0"),
            });
        }
        self.clip_norm = Some(max_norm);
        Ok(self)
    }

    /// Runs the steps and the evaluation under [`autocast_with`](crate::amp::autocast_with)
    /// `(dtype)` (`DType::BF16`, or `DType::F16`, whose step should scale its loss with a
    /// [`GradScaler`](crate::optim::GradScaler)); `None` (the default) runs in full
    /// precision.
    pub fn autocast(mut self, dtype: Option<DType>) -> Self {
        self.autocast = dtype;
        self
    }

    /// Continues the run that wrote `checkpoint` (with [`Trainer::checkpoint`],
    /// [`SaveCheckpoints`] or [`EpochEnd::checkpoint`]): before the first epoch, `fit`
    /// restores the model, the optimizer, the scheduler, the process-wide generator, the
    /// callbacks' states and the history, then trains epochs `checkpoint.epoch + 1 ..=
    /// epochs` (a checkpoint saved mid-epoch skips that epoch's batches already trained).
    /// Build the model, optimizer, scheduler and callbacks as for a fresh run; for the same
    /// batches as the uninterrupted run, `batches(epoch)` should depend on `epoch` only,
    /// e.g. `loader.epoch_from(epoch as u64 - 1, 0)`.
    pub fn resume_from(mut self, checkpoint: Checkpoint) -> Self {
        self.resume = Some(checkpoint);
        self
    }

    /// The CSV log's header: `epoch,train_loss,train_<metric>...,eval_loss,eval_<metric>...,lr,seconds`.
    pub fn csv_header(&self) -> String {
        let mut columns = vec!["epoch".to_string()];
        for phase in ["train", "eval"] {
            columns.push(format!("{phase}_loss"));
            columns.extend(self.metrics.iter().map(|m| format!("{phase}_{}", m.name())));
        }
        columns.extend(["lr".to_string(), "seconds".to_string()]);
        columns.join(",")
    }

    /// Trains `run`. `batches(epoch)` gives the epoch's batches (epochs count from 1): a
    /// [`DataLoader`](crate::data::DataLoader) epoch, or any iterator of `Result`s; `step`
    /// trains on one batch with the optimizer it is lent and reports the batch
    /// ([`StepOutput`]); `evaluate` gives the evaluation's batch reports after each epoch,
    /// which the trainer reads without gradients. The trainer switches the model's mode
    /// itself, as Lightning and Keras do: training mode for the steps, evaluation mode for
    /// `evaluate` (dropout off, BatchNorm's running statistics used and left as they are),
    /// and the mode it had before once `fit` returns. Then the scheduler steps, the logs get
    /// their row, the callbacks run, then `after_epoch` (see [`EpochEnd`]), then the
    /// checkpoints asked for are written. The first error stops training and is returned.
    ///
    /// Returns every epoch's summary, a resumed run's earlier ones included; a run stopped
    /// early returns the epochs it trained.
    pub fn fit<B, I, E>(
        &mut self,
        mut run: Run<'_>,
        mut batches: impl FnMut(usize) -> Result<I>,
        mut step: impl FnMut(B, &mut dyn Optimizer) -> Result<StepOutput>,
        mut evaluate: impl FnMut() -> Result<E>,
        mut after_epoch: impl FnMut(&mut EpochEnd<'_>) -> Result<()>,
    ) -> Result<Vec<EpochSummary>>
    where
        I: IntoIterator<Item = Result<B>>,
        E: IntoIterator<Item = Result<StepOutput>>,
    {
        if let Some(path) = &self.curve_path {
            check_can_plot(path)?;
        }
        let (mut history, mut resumed_mid_epoch, mut steps) = match &self.resume {
            Some(checkpoint) => {
                checkpoint.restore(run.model, run.optimizer)?;
                let scheduler = run.scheduler.as_mut().map(shorten);
                let (history, mid) =
                    loop_state::restore(checkpoint, run.optimizer, scheduler, &mut self.callbacks)?;
                (history, mid, checkpoint.step)
            }
            None => (Vec::with_capacity(self.epochs), MidEpoch::default(), 0),
        };
        if run.scheduler.is_some() {
            run.monitor.mode(&self.metrics)?;
        }
        let start = FitStart {
            metrics: &self.metrics,
            epochs: self.epochs,
            resumed: self.resume.is_some(),
        };
        for callback in &mut self.callbacks {
            callback.on_fit_start(&start)?;
        }
        let mut csv = self
            .csv_path
            .as_deref()
            .map(|path| CsvLog::create(path, &self.csv_header(), &history))
            .transpose()?;
        let mut tensorboard = self
            .tensorboard_dir
            .as_deref()
            .map(TensorBoardLog::create)
            .transpose()?;
        // The model's mode before training comes back when `fit` returns, even with an error.
        let _mode = ModeGuard::train(run.model);
        let _autocast = self.autocast.map(crate::amp::autocast_with).transpose()?;
        let mut train = PhaseMeter::new(&self.metrics);
        let mut eval = PhaseMeter::new(&self.metrics);
        for epoch in history.len() + 1..=self.epochs {
            let started = Instant::now();
            run.model.set_training(true);
            let lr = run.optimizer.lrs().first().copied().unwrap_or(0.0);
            let work = batches(epoch)?.into_iter();
            let bar = self.progress_bar(work.size_hint().0, epoch);
            let skip = std::mem::take(&mut resumed_mid_epoch);
            train.reset();
            train.carry(skip.loss_sum, skip.count);
            let mut lent = LentOptimizer::new(&mut *run.optimizer, self.accumulate, self.clip_norm);
            let mut saves = Vec::new();
            let mut ended_early = false;
            let mut trained = skip.batches;
            for (index, batch) in work.enumerate() {
                let batch = batch?;
                if index < skip.batches {
                    continue;
                }
                let output = step(batch, &mut lent)?;
                train.add(&output, "training")?;
                steps += 1;
                trained = index + 1;
                bar.tick(train.mean_loss());
                let mut end = BatchEnd {
                    epoch,
                    batch: trained,
                    steps,
                    loss: output.loss,
                    model: run.model,
                    optimizer: &lent,
                    save_to: std::mem::take(&mut saves),
                    stop: false,
                };
                for callback in &mut self.callbacks {
                    callback.on_train_batch_end(&mut end)?;
                }
                saves = end.save_to;
                if end.stop {
                    ended_early = true;
                    break;
                }
                if !lent.has_pending() {
                    let parts = (run.model, &lent as &dyn Optimizer, run.scheduler.as_deref());
                    let at = (epoch, steps, trained);
                    self.save_mid_epoch(&mut saves, parts, &history, at, &train)?;
                }
            }
            // Saves asked for while gradients were still accumulating wait for this step.
            lent.flush()?;
            let parts = (run.model, &lent as &dyn Optimizer, run.scheduler.as_deref());
            self.save_mid_epoch(&mut saves, parts, &history, (epoch, steps, trained), &train)?;
            bar.finish();
            eval.reset();
            {
                let _eval = ModeGuard::eval(run.model);
                let _no_grad = crate::no_grad();
                for output in evaluate()? {
                    eval.add(&output?, "evaluation")?;
                }
            }
            let eval_summary = eval.summary();
            for callback in &mut self.callbacks {
                callback.on_validation_end(epoch, &eval_summary)?;
            }
            let summary = EpochSummary {
                epoch,
                train: train.summary(),
                eval: eval_summary,
                lr,
                seconds: started.elapsed().as_secs_f64(),
            };
            if self.verbose {
                println!("{summary}");
            }
            if let Some(scheduler) = run.scheduler.as_mut() {
                let value = run.monitor.of(&summary).unwrap_or(f64::NAN);
                scheduler.step_epoch(run.optimizer, value);
            }
            if let Some(log) = &mut csv {
                log.append(&summary)?;
            }
            if let Some(log) = &mut tensorboard {
                log.append(&summary)?;
            }
            history.push(summary);
            let mut end = EpochEnd {
                summary: history.last().expect("just pushed"),
                history: &history,
                model: run.model,
                optimizer: &mut *run.optimizer,
                scheduler: run.scheduler.as_mut().map(shorten),
                callback_states: None,
                steps,
                stop: ended_early.then(|| "a callback ended the epoch early".to_string()),
                save_to: Vec::new(),
            };
            for callback in &mut self.callbacks {
                callback.on_epoch_end(&mut end)?;
            }
            end.callback_states = Some(loop_state::callback_states(&self.callbacks));
            after_epoch(&mut end)?;
            for path in std::mem::take(&mut end.save_to) {
                end.checkpoint()?.save(&path)?;
            }
            if let Some(reason) = end.stop {
                if self.verbose {
                    println!("stopping after epoch {epoch}: {reason}");
                }
                break;
            }
        }
        #[cfg(feature = "plot")]
        if let Some(path) = &self.curve_path {
            super::curve::write_curve(&history, path)?;
        }
        Ok(history)
    }

    /// Writes the checkpoints asked for in `saves` (none: nothing), `trained` batches into
    /// `epoch`: what a resumed run needs to skip those batches and carry their loss.
    fn save_mid_epoch(
        &self,
        saves: &mut Vec<PathBuf>,
        (model, optimizer, scheduler): (&dyn Module, &dyn Optimizer, Option<&dyn Scheduler>),
        history: &[EpochSummary],
        (epoch, steps, trained): (usize, u64, usize),
        train: &PhaseMeter,
    ) -> Result<()> {
        if saves.is_empty() {
            return Ok(());
        }
        let mut checkpoint = Checkpoint::capture(
            model,
            optimizer,
            scheduler.map(|s| s.epoch()),
            epoch as u64 - 1,
            steps,
        )?;
        let mid = MidEpoch {
            batches: trained,
            loss_sum: train.loss_sum(),
            count: train.count(),
        };
        let callbacks = loop_state::callback_states(&self.callbacks);
        checkpoint.loop_state = loop_state::capture(history, scheduler, &callbacks, Some(mid));
        for path in saves.drain(..) {
            checkpoint.save(&path)?;
        }
        Ok(())
    }

    fn progress_bar(&self, len: usize, epoch: usize) -> Progress {
        Progress::new(self.progress, len, epoch, self.epochs)
    }
}

/// Reborrows a scheduler with its trait object's lifetime shortened to the borrow's, which
/// `Option::as_deref_mut` cannot do.
fn shorten<'s>(scheduler: &'s mut &mut dyn Scheduler) -> &'s mut dyn Scheduler {
    &mut **scheduler
}

/// Whether a curve can be drawn, checked before training rather than after it.
#[cfg(feature = "plot")]
fn check_can_plot(_path: &std::path::Path) -> Result<()> {
    Ok(())
}

#[cfg(not(feature = "plot"))]
fn check_can_plot(path: &std::path::Path) -> Result<()> {
    Err(crate::Error::InvalidArgument {
        op: "Trainer",
        message: format!(
            "cannot write {}: rumus was built without the `plot` feature; enable it \
             (`rumus = {{ features = [\"plot\"] }}`) or drop `.curve(..)`",
            path.display()
        ),
    })
}

/// A progress bar when the `progress` feature is on and one was asked for; nothing otherwise.
struct Progress {
    #[cfg(feature = "progress")]
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    #[allow(unused_variables)]
    fn new(enabled: bool, len: usize, epoch: usize, epochs: usize) -> Self {
        #[cfg(feature = "progress")]
        {
            let bar = enabled.then(|| {
                let bar = indicatif::ProgressBar::new(len as u64);
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "{prefix} [{bar:30}] {pos}/{len} {msg} ({eta})",
                    )
                    .expect("a valid template")
                    .progress_chars("=> "),
                );
                bar.set_prefix(format!("epoch {epoch}/{epochs}"));
                bar
            });
            Progress { bar }
        }
        #[cfg(not(feature = "progress"))]
        Progress {}
    }

    #[allow(unused_variables)]
    fn tick(&self, mean_loss: f64) {
        #[cfg(feature = "progress")]
        if let Some(bar) = &self.bar {
            bar.set_message(format!("loss {mean_loss:.4}"));
            bar.inc(1);
        }
    }

    fn finish(&self) {
        #[cfg(feature = "progress")]
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
