//! The learning rate of every parameter group at every training batch, as a CSV file
//! (Lightning's `LearningRateMonitor(logging_interval="step")`): the per-epoch logs show one
//! rate per epoch, which hides warm-up and one-cycle schedules stepped per batch.

use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

use super::callback::{BatchEnd, Callback, FitStart};
use crate::error::{Error, Result};

/// Writes `step,epoch,lr_0,lr_1,...` after every training batch: the rates the next batch
/// trains with.
pub struct LearningRateLog {
    path: PathBuf,
    file: Option<File>,
    header_written: bool,
}

impl LearningRateLog {
    /// Logs to the CSV file `path` (created or truncated when training starts).
    pub fn csv(path: impl Into<PathBuf>) -> Self {
        LearningRateLog {
            path: path.into(),
            file: None,
            header_written: false,
        }
    }

    fn write(&mut self, text: &str) -> Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Ok(());
        };
        file.write_all(text.as_bytes()).map_err(|e| Error::Io {
            path: self.path.display().to_string(),
            message: format!("cannot write the learning-rate log: {e}"),
        })
    }
}

impl Callback for LearningRateLog {
    fn name(&self) -> String {
        "learning_rate_log".into()
    }

    fn on_fit_start(&mut self, _start: &FitStart<'_>) -> Result<()> {
        let file = File::create(&self.path).map_err(|e| Error::Io {
            path: self.path.display().to_string(),
            message: format!(
                "cannot create the learning-rate log: {e}; check that the directory exists \
                 and is writable"
            ),
        })?;
        self.file = Some(file);
        self.header_written = false;
        Ok(())
    }

    fn on_train_batch_end(&mut self, end: &mut BatchEnd<'_>) -> Result<()> {
        let lrs = end.optimizer.lrs();
        if !self.header_written {
            let header: Vec<String> = (0..lrs.len()).map(|g| format!("lr_{g}")).collect();
            self.write(&format!("step,epoch,{}\n", header.join(",")))?;
            self.header_written = true;
        }
        let rates: Vec<String> = lrs.iter().map(|lr| lr.to_string()).collect();
        self.write(&format!(
            "{},{},{}\n",
            end.steps,
            end.epoch,
            rates.join(",")
        ))
    }
}
