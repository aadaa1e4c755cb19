//! The `k` best checkpoints of a run by a monitored value, as Lightning's `ModelCheckpoint`
//! with `save_top_k`: each epoch that ranks among the best `k` so far is saved as
//! `epoch=<e>-<monitor>=<value>.ckpt` in a directory, and the one it pushes out is deleted.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use super::callback::{Callback, FitStart};
use super::monitor::Monitor;
use super::run::EpochEnd;
use crate::error::{Error, Result};
use crate::optim::Mode;

const KEY_KEPT: &str = "kept";

/// Keeps the `k` best epochs' checkpoints in a directory. The trainer owns the callback; a
/// [`KeptCheckpoints`] taken before training says which files it kept.
///
/// ```no_run
/// use rumus::train::{KeepBest, Monitor, Trainer};
///
/// let keep = KeepBest::new("checkpoints", Monitor::EVAL_LOSS, 3)?;
/// let kept = keep.kept();
/// let trainer = Trainer::new(20).callback(keep);
/// // ... trainer.fit(..)?; then:
/// if let Some((path, loss)) = kept.best() {
///     println!("best: {} (eval_loss {loss})", path.display());
/// }
/// # Ok::<(), rumus::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct KeepBest {
    dir: PathBuf,
    monitor: Monitor,
    k: usize,
    mode: Mode,
    kept: KeptCheckpoints,
}

/// The files a [`KeepBest`] keeps, with their values, best first; shared with the callback,
/// so it can be read after `fit` has taken the callback.
#[derive(Debug, Clone, Default)]
pub struct KeptCheckpoints(Arc<Mutex<Vec<(f64, PathBuf)>>>);

impl KeptCheckpoints {
    /// The best checkpoint so far and its value.
    pub fn best(&self) -> Option<(PathBuf, f64)> {
        self.list().first().map(|(v, p)| (p.clone(), *v))
    }

    /// Every checkpoint kept and its value, best first.
    pub fn all(&self) -> Vec<(PathBuf, f64)> {
        self.list().iter().map(|(v, p)| (p.clone(), *v)).collect()
    }

    fn list(&self) -> MutexGuard<'_, Vec<(f64, PathBuf)>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl KeepBest {
    /// Keeps the `k` (at least 1) best epochs by `monitor` in `dir`, created if missing.
    pub fn new(dir: impl Into<PathBuf>, monitor: Monitor, k: usize) -> Result<Self> {
        if k == 0 {
            return Err(Error::InvalidArgument {
                op: "KeepBest::new",
                message: "k is 0; give how many of the best checkpoints to keep (at least 1)"
                    .into(),
            });
        }
        Ok(KeepBest {
            dir: dir.into(),
            monitor,
            k,
            mode: Mode::Min,
            kept: KeptCheckpoints::default(),
        })
    }

    /// The files kept, readable while and after the trainer runs the callback.
    pub fn kept(&self) -> KeptCheckpoints {
        self.kept.clone()
    }

    fn better(&self, a: f64, b: f64) -> bool {
        match self.mode {
            Mode::Min => a < b,
            Mode::Max => a > b,
        }
    }
}

impl Callback for KeepBest {
    fn name(&self) -> String {
        format!("keep_best({}, {})", self.monitor.name(), self.k)
    }

    fn on_fit_start(&mut self, start: &FitStart<'_>) -> Result<()> {
        self.mode = start.mode(&self.monitor)?;
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::Io {
            path: self.dir.display().to_string(),
            message: format!("cannot create the directory for the best checkpoints: {e}"),
        })
    }

    /// A NaN value never ranks (a diverged epoch is not a best one).
    fn on_epoch_end(&mut self, end: &mut EpochEnd<'_>) -> Result<()> {
        let value = self.monitor.of(end.summary).unwrap_or(f64::NAN);
        if value.is_nan() {
            return Ok(());
        }
        let mut kept = self.kept.list();
        let rank = kept
            .iter()
            .position(|&(v, _)| self.better(value, v))
            .unwrap_or(kept.len());
        if rank >= self.k {
            return Ok(());
        }
        let name = format!(
            "epoch={}-{}={value:.4}.ckpt",
            end.summary.epoch,
            self.monitor.name()
        );
        let path = self.dir.join(name);
        end.save_checkpoint(path.clone());
        kept.insert(rank, (value, path));
        if kept.len() > self.k {
            let (_, dropped) = kept.pop().expect("more than k >= 1 kept");
            std::fs::remove_file(&dropped).or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(Error::Io {
                    path: dropped.display().to_string(),
                    message: format!(
                        "cannot delete a checkpoint that left the best {}: {e}",
                        self.k
                    ),
                }),
            })?;
        }
        Ok(())
    }

    /// The kept files and values, one `value<TAB>path` per line.
    fn state(&self) -> BTreeMap<String, String> {
        let lines: String = self
            .kept
            .list()
            .iter()
            .map(|(v, p)| format!("{v:e}\t{}\n", p.display()))
            .collect();
        BTreeMap::from([(KEY_KEPT.to_string(), lines)])
    }

    fn restore(&mut self, state: &BTreeMap<String, String>, source: &str) -> Result<()> {
        let text = state.get(KEY_KEPT).ok_or_else(|| Error::InvalidArgument {
            op: "Trainer::resume_from",
            message: format!("{source}: it holds no list of the best checkpoints"),
        })?;
        *self.kept.list() = text
            .split_terminator('\n')
            .map(|line| {
                let (value, path) = line.split_once('\t')?;
                Some((value.parse().ok()?, PathBuf::from(path)))
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::InvalidArgument {
                op: "Trainer::resume_from",
                message: format!("{source}: its list of the best checkpoints is malformed"),
            })?;
        Ok(())
    }
}
