//! A training loop for the common case; anything it does not fit is a plain loop over the
//! same pieces (`backward`, an optimizer's `step`, [`Metrics`]).

use std::path::PathBuf;
use std::time::Instant;

use super::metrics::{EpochSummary, Metrics};
use crate::error::Result;

/// Runs epochs of training steps, evaluates after each, prints one summary line per epoch,
/// shows a progress bar over the batches (on a terminal), and draws the curves at the end.
pub struct Trainer {
    /// Number of epochs to run.
    pub epochs: usize,
    /// Show a progress bar over each epoch's batches (feature `progress`).
    pub progress: bool,
    /// Where to write the loss/accuracy curve (feature `plot`).
    pub curve_path: Option<PathBuf>,
    /// Print the per-epoch summary line.
    pub verbose: bool,
}

impl Trainer {
    /// A trainer for `epochs` epochs, with the progress bar and summary lines on and no
    /// curve.
    pub fn new(epochs: usize) -> Self {
        Trainer {
            epochs,
            progress: true,
            curve_path: None,
            verbose: true,
        }
    }

    /// Writes the loss/accuracy curve to `path` after training (needs the `plot` feature;
    /// without it `fit` fails before the first epoch).
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

    /// `batches(epoch)` gives the epoch's batches: a [`DataLoader`](crate::data::DataLoader)
    /// epoch, or any iterator of `Result`s (`vec.into_iter().map(Ok)`); `step` trains on one
    /// and reports its metrics; `evaluate` measures the model after the epoch; `after_epoch`
    /// runs last (a scheduler step, a checkpoint). The first error stops training and is
    /// returned. Returns the history.
    pub fn fit<B, I>(
        &self,
        mut batches: impl FnMut(usize) -> Result<I>,
        mut step: impl FnMut(B) -> Result<Metrics>,
        mut evaluate: impl FnMut() -> Result<Metrics>,
        mut after_epoch: impl FnMut(&EpochSummary) -> Result<()>,
    ) -> Result<Vec<EpochSummary>>
    where
        I: IntoIterator<Item = Result<B>>,
    {
        if let Some(path) = &self.curve_path {
            check_can_plot(path)?;
        }
        let mut history = Vec::with_capacity(self.epochs);
        for epoch in 1..=self.epochs {
            let start = Instant::now();
            let work = batches(epoch)?.into_iter();
            let bar = self.progress_bar(work.size_hint().0, epoch);
            let mut train = Metrics::default();
            for batch in work {
                train.add(step(batch?)?);
                bar.tick(&train);
            }
            bar.finish();
            let summary = EpochSummary {
                epoch,
                train,
                eval: evaluate()?,
                seconds: start.elapsed().as_secs_f64(),
            };
            if self.verbose {
                println!("{summary}");
            }
            after_epoch(&summary)?;
            history.push(summary);
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
