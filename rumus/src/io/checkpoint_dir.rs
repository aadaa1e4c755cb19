//! A directory of rolling checkpoints: `checkpoint-<step>.safetensors`, the newest few kept.
//! Each file is written atomically, so a run killed at any moment leaves only complete
//! checkpoints (and perhaps a stray temporary file, which is ignored and later removed).
//!
//! Several managers may share a directory (two processes resuming the same run, a trainer
//! and an evaluator): their saves take turns through a lock file.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::atomic::TEMP_MARKER;
use super::checkpoint::Checkpoint;
use crate::error::{Error, Result};

const PREFIX: &str = "checkpoint-";
const SUFFIX: &str = ".safetensors";
/// The file every save locks (exclusively) while it writes and prunes. Without it, one
/// manager's cleanup deletes the temporary file another is about to rename, and their
/// prunes work from listings the other is changing. It is an OS file lock (`flock` on Unix,
/// `LockFileEx` on Windows), released when its holder exits or is killed, so a crash never
/// leaves the directory locked; the empty file itself stays.
const LOCK_FILE: &str = ".lock";

/// Saves checkpoints into one directory and finds the newest one to resume from.
///
/// ```no_run
/// # fn main() -> rumus::Result<()> {
/// use rumus::io::CheckpointManager;
/// let manager = CheckpointManager::new("runs/exp1", 3)?;
/// if let Some(checkpoint) = manager.latest()? {
///     // checkpoint.restore(&model, &mut optimizer)?; ...
/// #   let _ = checkpoint;
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct CheckpointManager {
    dir: PathBuf,
    keep_last: usize,
}

fn io_error(path: &Path, message: String) -> Error {
    Error::Io {
        path: path.display().to_string(),
        message,
    }
}

/// The step of a file named `checkpoint-<digits>.safetensors`, or `None` for other files
/// (temporary files included).
fn step_of(file_name: &str) -> Option<u64> {
    let digits = file_name.strip_prefix(PREFIX)?.strip_suffix(SUFFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

impl CheckpointManager {
    /// Uses (and creates, with its parents) `dir`, keeping the newest `keep_last` checkpoints
    /// (at least 1).
    pub fn new(dir: impl Into<PathBuf>, keep_last: usize) -> Result<Self> {
        let dir = dir.into();
        if keep_last == 0 {
            return Err(Error::InvalidArgument {
                op: "CheckpointManager::new",
                message: "keep_last is 0, which would delete every checkpoint right after \
                          saving it; keep at least 1"
                    .into(),
            });
        }
        fs::create_dir_all(&dir)
            .map_err(|e| io_error(&dir, format!("cannot create the checkpoint directory: {e}")))?;
        Ok(CheckpointManager { dir, keep_last })
    }

    /// The directory the checkpoints are kept in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the checkpoint of `step` goes: `checkpoint-<step, 10 digits>.safetensors`.
    pub fn path_for(&self, step: u64) -> PathBuf {
        self.dir.join(format!("{PREFIX}{step:010}{SUFFIX}"))
    }

    /// Writes `checkpoint` as [`CheckpointManager::path_for`] its step (replacing a file of
    /// the same step), then deletes all but the newest `keep_last` checkpoints (by step;
    /// the one just written is always kept) and temporary files of killed writers that are
    /// older than it. Returns the path written.
    ///
    /// Saves of all managers on this directory, in any process, take turns: each holds the
    /// directory's lock file `.lock` (created on the first save) from writing to pruning; the
    /// file's bytes are built (checked, read back from a GPU, checksummed) before the lock is
    /// taken, so other savers wait only for the write.
    pub fn save(&self, checkpoint: &Checkpoint) -> Result<PathBuf> {
        let path = self.path_for(checkpoint.step);
        let bytes = checkpoint.bytes_for(&path)?;
        let _lock = self.lock()?;
        crate::io::write_atomic(&path, &bytes)?;
        self.prune(&path)?;
        Ok(path)
    }

    /// Waits for the directory's lock and holds it until the returned file is dropped.
    fn lock(&self) -> Result<File> {
        let path = self.dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| io_error(&path, format!("cannot open the directory's lock file: {e}")))?;
        file.lock().map_err(|e| {
            io_error(
                &path,
                format!(
                    "cannot lock the checkpoint directory (does its file system support file \
                     locks?): {e}"
                ),
            )
        })?;
        Ok(file)
    }

    /// The directory's lock taken shared (readers together, never during a save), or `None`
    /// where the lock file cannot be opened.
    fn lock_shared(&self) -> Option<File> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(self.dir.join(LOCK_FILE))
            .ok()?;
        file.lock_shared().ok()?;
        Some(file)
    }

    fn prune(&self, newest: &Path) -> Result<()> {
        let older: Vec<PathBuf> = self.list()?.into_iter().filter(|p| p != newest).collect();
        let excess = older.len().saturating_sub(self.keep_last - 1);
        for old in &older[..excess] {
            match fs::remove_file(old) {
                Ok(()) => {}
                // Removed by someone else meanwhile: the goal is reached.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(io_error(
                        old,
                        format!(
                            "checkpoint {} was saved, but this old one cannot be removed: {e}",
                            newest.display()
                        ),
                    ));
                }
            }
        }
        let Ok(cutoff) = fs::metadata(newest).and_then(|m| m.modified()) else {
            return Ok(()); // no modification times here: leave temporary files alone
        };
        // Saves through managers take turns, so a temporary file here is a leftover of a
        // killed writer, or belongs to a `Checkpoint::save` that bypasses the lock: only
        // files older than the one just written, and none of this process (another thread
        // may be writing it), are removed.
        let own = format!("{TEMP_MARKER}{}-", std::process::id());
        for (path, name) in self.entries()? {
            let stale = name.starts_with(PREFIX)
                && name.contains(TEMP_MARKER)
                && !name.contains(&own)
                && older_than(&path, cutoff);
            if stale {
                // Best effort: a leftover that cannot be removed does no harm.
                let _ = fs::remove_file(&path);
            }
        }
        Ok(())
    }

    /// File paths and names in the directory.
    fn entries(&self) -> Result<Vec<(PathBuf, String)>> {
        let listing_error =
            |e: std::io::Error| io_error(&self.dir, format!("cannot list checkpoints: {e}"));
        let mut out = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(listing_error)? {
            let entry = entry.map_err(listing_error)?;
            if let Some(name) = entry.file_name().to_str() {
                out.push((entry.path(), name.to_string()));
            }
        }
        Ok(out)
    }

    /// The checkpoint files, oldest step first. Temporary files are not listed.
    pub fn list(&self) -> Result<Vec<PathBuf>> {
        let mut found: Vec<(u64, String, PathBuf)> = self
            .entries()?
            .into_iter()
            .filter_map(|(path, name)| Some((step_of(&name)?, name, path)))
            .collect();
        found.sort();
        Ok(found.into_iter().map(|(_, _, path)| path).collect())
    }

    /// The newest checkpoint that loads. A newer file that fails to load (damaged after it
    /// was written) is skipped in favour of an older good one; [`CheckpointManager::scan`]
    /// tells which were skipped and why. `Ok(None)` means the directory holds no checkpoint,
    /// so training starts from scratch. When files exist but none loads, or the directory
    /// cannot be read, it is an error rather than `None`, so a run never silently restarts
    /// from scratch over damaged checkpoints.
    pub fn latest(&self) -> Result<Option<Checkpoint>> {
        let scan = self.scan()?;
        match (scan.latest, scan.skipped.first()) {
            (Some((_, checkpoint)), _) => Ok(Some(checkpoint)),
            (None, None) => Ok(None),
            (None, Some(newest_error)) => Err(Error::Format {
                path: self.dir.display().to_string(),
                message: format!(
                    "none of the {} checkpoints loads; the newest: {newest_error}",
                    scan.skipped.len()
                ),
            }),
        }
    }

    /// Loads checkpoints from the newest down until one loads, keeping the errors of those
    /// that did not (for logging). It holds the directory's lock shared while it lists and
    /// loads, so a concurrent save cannot prune a file between the listing and the load (a
    /// directory where the lock file cannot be created, read-only say, is scanned without).
    pub fn scan(&self) -> Result<CheckpointScan> {
        let _shared = self.lock_shared();
        let mut skipped = Vec::new();
        for path in self.list()?.into_iter().rev() {
            match Checkpoint::load(&path) {
                Ok(checkpoint) => {
                    return Ok(CheckpointScan {
                        latest: Some((path, checkpoint)),
                        skipped,
                    });
                }
                Err(e) => skipped.push(e),
            }
        }
        Ok(CheckpointScan {
            latest: None,
            skipped,
        })
    }
}

/// What [`CheckpointManager::scan`] found.
#[derive(Debug)]
pub struct CheckpointScan {
    /// The newest checkpoint that loads, with its path.
    pub latest: Option<(PathBuf, Checkpoint)>,
    /// Why each newer checkpoint file failed to load, newest first.
    pub skipped: Vec<Error>,
}

fn older_than(path: &Path, cutoff: SystemTime) -> bool {
    fs::metadata(path)
        .and_then(|m| m.modified())
        .is_ok_and(|t| t < cutoff)
}
