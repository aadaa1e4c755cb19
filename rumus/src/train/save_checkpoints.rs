//! Checkpoints at a fixed rhythm: after every epoch, or every `n` training batches (a
//! mid-epoch checkpoint, for long epochs on machines that may be taken away).

use std::path::PathBuf;

use super::callback::{BatchEnd, Callback};
use super::run::EpochEnd;
use crate::error::{Error, Result};

/// Saves a checkpoint to one path, overwritten each time (atomically: a crash while saving
/// leaves the previous one), to resume from with
/// [`Trainer::resume_from`](super::Trainer::resume_from).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaveCheckpoints {
    path: PathBuf,
    every_steps: Option<u64>,
}

impl SaveCheckpoints {
    /// After every epoch ([`Trainer::checkpoint`](super::Trainer::checkpoint) adds this).
    pub fn every_epoch(path: impl Into<PathBuf>) -> Self {
        SaveCheckpoints {
            path: path.into(),
            every_steps: None,
        }
    }

    /// After every `steps` training batches (counted over the whole run), mid-epoch
    /// included. `steps` is at least 1.
    pub fn every_steps(path: impl Into<PathBuf>, steps: u64) -> Result<Self> {
        if steps == 0 {
            return Err(Error::InvalidArgument {
                op: "SaveCheckpoints::every_steps",
                message: "steps is 0; give the number of training batches between checkpoints \
                          (at least 1)"
                    .into(),
            });
        }
        Ok(SaveCheckpoints {
            path: path.into(),
            every_steps: Some(steps),
        })
    }
}

impl Callback for SaveCheckpoints {
    fn name(&self) -> String {
        match self.every_steps {
            None => "save_checkpoints(every epoch)".into(),
            Some(n) => format!("save_checkpoints(every {n} steps)"),
        }
    }

    fn on_train_batch_end(&mut self, end: &mut BatchEnd<'_>) -> Result<()> {
        if self
            .every_steps
            .is_some_and(|n| end.steps.is_multiple_of(n))
        {
            end.save_checkpoint(self.path.clone());
        }
        Ok(())
    }

    fn on_epoch_end(&mut self, end: &mut EpochEnd<'_>) -> Result<()> {
        if self.every_steps.is_none() {
            end.save_checkpoint(self.path.clone());
        }
        Ok(())
    }
}
