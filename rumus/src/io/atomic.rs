//! Crash-safe file replacement. Writing a file in place leaves a torn file behind when the
//! process dies (or the machine loses power) halfway; for checkpoints, model files and record
//! files that means losing the previous good copy as well as the new one. Writing to a
//! temporary file next to the target and renaming it over the target instead means a reader
//! sees either the complete old file or the complete new one, never a mix.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{Error, Result};

/// Makes temporary names unique between threads of one process (the pid separates
/// processes).
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The part that every temporary file name carries after the target's name; directory
/// cleanup (`CheckpointManager`) recognises leftovers of killed writers by it.
pub(crate) const TEMP_MARKER: &str = ".tmp-";

fn io_error(path: &Path, message: String) -> Error {
    Error::Io {
        path: path.display().to_string(),
        message,
    }
}

/// Replaces `path` with `bytes` atomically: the bytes go to `<name>.tmp-<pid>-<counter>` in
/// the same directory (a rename is only atomic within one file system), are flushed to disk
/// with `sync_all`, and the temporary file is renamed over `path`; finally the directory is
/// synced so the rename itself survives a power loss. A crash at any point leaves the
/// previous file intact (plus, at worst, a stray temporary file). On an error the temporary
/// file is removed and `path` is untouched.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = AtomicFile::create(path)?;
    file.write_all(bytes).map_err(|e| {
        io_error(
            &file.temp,
            format!("cannot write {} bytes: {e}", bytes.len()),
        )
    })?;
    file.commit()
}

/// A file written under a temporary name next to `target`, which it replaces only on
/// [`AtomicFile::commit`]: [`write_atomic`] for writers that stream (record files). Dropped
/// without a commit, it removes the temporary file and leaves the target as it was.
pub(crate) struct AtomicFile {
    /// `None` once `commit` has closed it.
    file: Option<File>,
    temp: PathBuf,
    target: PathBuf,
    dir: PathBuf,
    /// Set once the rename happened: no temporary file is left to remove.
    renamed: bool,
}

impl AtomicFile {
    /// Creates the temporary file for `target`, with `create_new` so that it never reuses
    /// another writer's. A name already taken (left by a killed run whose process id this one
    /// got again, as happens in containers) moves on to the next counter value.
    pub(crate) fn create(target: &Path) -> Result<Self> {
        const ATTEMPTS: usize = 64;
        let mut attempt = 0;
        let (dir, temp, file) = loop {
            let (dir, temp) = temp_path(target)?;
            match OpenOptions::new().write(true).create_new(true).open(&temp) {
                Ok(file) => break (dir, temp, file),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && attempt < ATTEMPTS => {
                    attempt += 1;
                }
                Err(e) => {
                    return Err(io_error(
                        &temp,
                        format!("cannot create a temporary file: {e}"),
                    ));
                }
            }
        };
        Ok(AtomicFile {
            file: Some(file),
            temp,
            target: target.to_path_buf(),
            dir,
            renamed: false,
        })
    }

    fn file(&mut self) -> std::io::Result<&mut File> {
        self.file
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the file was already committed"))
    }

    /// Syncs the temporary file to disk, renames it over the target and syncs the directory.
    /// On an error the temporary file is removed (by `drop`) and the target is untouched.
    pub(crate) fn commit(mut self) -> Result<()> {
        if let Some(file) = self.file.take() {
            file.sync_all()
                .map_err(|e| io_error(&self.temp, format!("cannot sync it to disk: {e}")))?;
        }
        fs::rename(&self.temp, &self.target).map_err(|e| {
            io_error(
                &self.target,
                format!(
                    "cannot replace it with the temporary file {}: {e}",
                    self.temp.display()
                ),
            )
        })?;
        self.renamed = true;
        sync_dir(&self.dir);
        Ok(())
    }
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file()?.write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.file()?.write_all(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file()?.flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if !self.renamed {
            drop(self.file.take()); // closed first: Windows cannot remove an open file
            // Best effort: the file may already be gone.
            let _ = fs::remove_file(&self.temp);
        }
    }
}

/// The directory of `target` and a temporary name in it, `<name>.tmp-<pid>-<counter>`: unique
/// between processes (the pid) and between the threads of one (the counter).
fn temp_path(target: &Path) -> Result<(PathBuf, PathBuf)> {
    let Some(file_name) = target.file_name() else {
        return Err(io_error(
            target,
            "is not a file path (it has no file name); pass a path such as \
             `dir/model.safetensors`"
                .into(),
        ));
    };
    let dir = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut temp_name = OsString::from(file_name);
    temp_name.push(format!(
        "{TEMP_MARKER}{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let temp = dir.join(temp_name);
    Ok((dir, temp))
}

/// Persists the directory entry created by the rename. Opening a directory as a file fails
/// on some platforms (Windows); the rename has happened either way, so errors are ignored.
fn sync_dir(dir: &Path) {
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Temporary names left by a killed run of the same process id (counter from 0 again)
    /// are stepped over, not an error.
    #[test]
    fn names_left_by_an_earlier_process_of_the_same_id_are_skipped() {
        let dir = std::env::temp_dir().join(format!("rumus-atomic-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("state.bin");
        let next = COUNTER.load(Ordering::Relaxed);
        for counter in next..next + 3 {
            let name = format!("state.bin{TEMP_MARKER}{}-{counter}", std::process::id());
            std::fs::write(dir.join(name), b"left over").unwrap();
        }
        write_atomic(&target, b"new").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
