//! A training loop for the common case, in the spirit of PyTorch Lightning's `Trainer`;
//! anything it does not fit is a plain loop over the same pieces (`backward`, an optimizer's
//! `step`, [`Metrics`]). Its parts live beside it: [`EarlyStopping`], the CSV and
//! TensorBoard logs, the curves, and the checkpointed loop state.

use std::path::PathBuf;
use std::time::Instant;

use super::csv_log::CsvLog;
use super::early_stopping::EarlyStopping;
use super::loop_state;
use super::metrics::{EpochSummary, Metrics};
use super::run::{EpochEnd, Run};
use super::tensorboard::TensorBoardLog;
use crate::error::Result;
use crate::io::Checkpoint;
use crate::nn::ModeGuard;
use crate::optim::{Optimizer, Scheduler};

/// Runs epochs of training steps, evaluates after each, steps the scheduler, and reports:
/// one summary line per epoch, a progress bar over the batches (on a terminal), a CSV row per
/// epoch, TensorBoard scalars, and the curves at the end. It can stop early on a metric,
/// save a checkpoint after every epoch, and resume from one exactly where it left off.
///
/// ```
/// use rumus::optim::{Sgd, SgdConfig};
/// use rumus::prelude::*;
/// use rumus::train::{Run, Trainer, classification};
///
/// // Two points, two classes, one linear layer.
/// let model = Linear::<2, 2>::new()?;
/// let x = DynTensor::from_vec(vec![1.0f32, 0.0, 0.0, 1.0], &[2, 2])?;
/// let y = DynTensor::from_vec(vec![0i64, 1], &[2])?;
/// let mut optimizer = Sgd::new(model.parameters(), SgdConfig { lr: 0.5, ..Default::default() })?;
/// let history = Trainer::new(20).quiet().fit(
///     Run::new(&model, &mut optimizer),
///     // The batches of an epoch (1, 2, ...): here one batch; usually a DataLoader epoch.
///     |_epoch| Ok([Ok((x.clone(), y.clone()))]),
///     // One training step; the trainer lends the optimizer.
///     |(x, y): (DynTensor, DynTensor), optimizer| {
///         let (loss, metrics) = classification(&model.forward_dyn(&x)?, &y)?;
///         optimizer.step(&mut loss.backward()?)?;
///         Ok(metrics)
///     },
///     // The evaluation after each epoch.
///     || {
///         let _guard = rumus::no_grad();
///         Ok(classification(&model.forward_dyn(&x)?, &y)?.1)
///     },
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
    /// Where to write the loss/accuracy curves (feature `plot`).
    pub curve_path: Option<PathBuf>,
    /// Where to write the per-epoch CSV log.
    pub csv_path: Option<PathBuf>,
    /// The directory of the TensorBoard event file.
    pub tensorboard_dir: Option<PathBuf>,
    /// Where to save a checkpoint after every epoch.
    pub checkpoint_path: Option<PathBuf>,
    /// When to stop before `epochs`.
    pub early_stopping: Option<EarlyStopping>,
    /// The checkpoint to resume from.
    pub resume: Option<Checkpoint>,
}

impl Trainer {
    /// A trainer for `epochs` epochs, with the progress bar and summary lines on, and no
    /// files written.
    pub fn new(epochs: usize) -> Self {
        Trainer {
            epochs,
            progress: true,
            verbose: true,
            curve_path: None,
            csv_path: None,
            tensorboard_dir: None,
            checkpoint_path: None,
            early_stopping: None,
            resume: None,
        }
    }

    /// Writes the loss and accuracy curves to `path` (PNG) after training (needs the `plot`
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

    /// Logs every epoch to the CSV file `path` (header
    /// [`CSV_HEADER`](super::CSV_HEADER)), a row as each epoch ends. A fresh run
    /// starts the file anew; a resumed one rewrites the rows of its checkpoint's history and
    /// goes on from there.
    pub fn csv(mut self, path: impl Into<PathBuf>) -> Self {
        self.csv_path = Some(path.into());
        self
    }

    /// Logs every epoch's scalars to a new TensorBoard event file in `dir`
    /// (`tensorboard --logdir dir`).
    pub fn tensorboard(mut self, dir: impl Into<PathBuf>) -> Self {
        self.tensorboard_dir = Some(dir.into());
        self
    }

    /// Saves a checkpoint to `path` after every epoch (atomically: a crash while saving
    /// leaves the previous one), to resume from with [`Trainer::resume_from`].
    pub fn checkpoint(mut self, path: impl Into<PathBuf>) -> Self {
        self.checkpoint_path = Some(path.into());
        self
    }

    /// Stops training when `rule` says so.
    pub fn early_stopping(mut self, rule: EarlyStopping) -> Self {
        self.early_stopping = Some(rule);
        self
    }

    /// Continues the run that wrote `checkpoint` (with [`Trainer::checkpoint`] or
    /// [`EpochEnd::checkpoint`]): before the first epoch, `fit` restores the model, the
    /// optimizer, the scheduler, the process-wide generator, early stopping and the
    /// history, then trains epochs `checkpoint.epoch + 1 ..= epochs`. Build the model,
    /// optimizer and scheduler as for a fresh run; for the same batches as the
    /// uninterrupted run, `batches(epoch)` should depend on `epoch` only, e.g.
    /// `loader.epoch_from(epoch as u64 - 1, 0)`.
    pub fn resume_from(mut self, checkpoint: Checkpoint) -> Self {
        self.resume = Some(checkpoint);
        self
    }

    /// Trains `run`. `batches(epoch)` gives the epoch's batches (epochs count from 1): a
    /// [`DataLoader`](crate::data::DataLoader) epoch, or any iterator of `Result`s; `step`
    /// trains on one batch with the optimizer it is lent and reports its metrics; `evaluate`
    /// measures the model after the epoch. The trainer switches the model's mode itself, as
    /// Lightning and Keras do: training mode for the steps, evaluation mode for `evaluate`
    /// (dropout off, BatchNorm's running statistics used and left as they are), and the
    /// mode it had before once `fit` returns. Then the scheduler steps, early stopping looks at
    /// the epoch, the logs get their row, and `after_epoch` runs with the optimizer and the
    /// scheduler (see [`EpochEnd`]). The first error stops training and is returned.
    ///
    /// Returns every epoch's summary, a resumed run's earlier ones included; a run stopped
    /// early returns the epochs it trained.
    pub fn fit<B, I>(
        &self,
        mut run: Run<'_>,
        mut batches: impl FnMut(usize) -> Result<I>,
        mut step: impl FnMut(B, &mut dyn Optimizer) -> Result<Metrics>,
        mut evaluate: impl FnMut() -> Result<Metrics>,
        mut after_epoch: impl FnMut(&mut EpochEnd<'_>) -> Result<()>,
    ) -> Result<Vec<EpochSummary>>
    where
        I: IntoIterator<Item = Result<B>>,
    {
        if let Some(path) = &self.curve_path {
            check_can_plot(path)?;
        }
        let mut early_stopping = self.early_stopping.clone();
        if let Some(rule) = &early_stopping {
            rule.check()?;
        }
        let (mut history, mut steps) = match &self.resume {
            Some(checkpoint) => {
                checkpoint.restore(run.model, run.optimizer)?;
                let scheduler = run.scheduler.as_mut().map(shorten);
                let history = loop_state::restore(
                    checkpoint,
                    run.optimizer,
                    scheduler,
                    early_stopping.as_mut(),
                )?;
                (history, checkpoint.step)
            }
            None => (Vec::with_capacity(self.epochs), 0),
        };
        let mut csv = self
            .csv_path
            .as_deref()
            .map(|path| CsvLog::create(path, &history))
            .transpose()?;
        let mut tensorboard = self
            .tensorboard_dir
            .as_deref()
            .map(TensorBoardLog::create)
            .transpose()?;
        // The model's mode before training comes back when `fit` returns, even with an error.
        let _mode = ModeGuard::train(run.model);
        for epoch in history.len() + 1..=self.epochs {
            let start = Instant::now();
            run.model.set_training(true);
            let lr = run.optimizer.lrs().first().copied().unwrap_or(0.0);
            let work = batches(epoch)?.into_iter();
            let bar = self.progress_bar(work.size_hint().0, epoch);
            let mut train = Metrics::default();
            for batch in work {
                train.add(step(batch?, &mut *run.optimizer)?);
                steps += 1;
                bar.tick(&train);
            }
            bar.finish();
            let eval = {
                let _eval = ModeGuard::eval(run.model);
                evaluate()?
            };
            let summary = EpochSummary {
                epoch,
                train,
                eval,
                lr,
                seconds: start.elapsed().as_secs_f64(),
            };
            if self.verbose {
                println!("{summary}");
            }
            if let Some(scheduler) = run.scheduler.as_mut() {
                scheduler.step_epoch(run.optimizer, run.monitor.of(&summary));
            }
            let stop_reason = early_stopping.as_mut().and_then(|e| e.update(&summary));
            history.push(summary);
            if let Some(log) = &mut csv {
                log.append(&summary)?;
            }
            if let Some(log) = &mut tensorboard {
                log.append(&summary)?;
            }
            let mut end = EpochEnd {
                summary: &summary,
                history: &history,
                model: run.model,
                optimizer: &mut *run.optimizer,
                scheduler: run.scheduler.as_mut().map(shorten),
                early_stopping: early_stopping.as_ref(),
                steps,
                stop: false,
            };
            after_epoch(&mut end)?;
            if let Some(path) = &self.checkpoint_path {
                end.checkpoint()?.save(path)?;
            }
            if end.stop || stop_reason.is_some() {
                if self.verbose {
                    let reason = stop_reason
                        .as_deref()
                        .unwrap_or("the callback asked to stop");
                    println!("early stopping after epoch {epoch}: {reason}");
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
    fn tick(&self, so_far: &Metrics) {
        #[cfg(feature = "progress")]
        if let Some(bar) = &self.bar {
            bar.set_message(format!("loss {:.4}", so_far.mean_loss()));
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
