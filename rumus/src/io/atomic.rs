//! Crash-safe file replacement. Writing a file in place leaves a torn file behind when the
//! process dies (or the machine loses power) halfway; for checkpoints and model files that
//! means losing the previous good copy as well as the new one. Writing to a temporary file
//! next to the target and renaming it over the target instead means a reader sees either the
//! complete old file or the complete new one, never a mix.

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
    let Some(file_name) = path.file_name() else {
        return Err(io_error(
            path,
            "is not a file path (it has no file name); pass a path such as `dir/model.safetensors`"
                .into(),
        ));
    };
    let dir = match path.parent() {
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
    if let Err(e) = write_and_rename(&temp, path, bytes) {
        // Best effort: the temporary file may not exist (creation failed) or may already be
        // renamed (only the directory sync failed, which is not reported as an error).
        let _ = fs::remove_file(&temp);
        return Err(e);
    }
    sync_dir(&dir);
    Ok(())
}

fn write_and_rename(temp: &Path, path: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp)
        .map_err(|e| io_error(temp, format!("cannot create a temporary file: {e}")))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| io_error(temp, format!("cannot write {} bytes: {e}", bytes.len())))?;
    drop(file);
    fs::rename(temp, path).map_err(|e| {
        io_error(
            path,
            format!(
                "cannot replace it with the temporary file {}: {e}",
                temp.display()
            ),
        )
    })
}

/// Persists the directory entry created by the rename. Opening a directory as a file fails
/// on some platforms (Windows); the rename has happened either way, so errors are ignored.
fn sync_dir(dir: &Path) {
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
}
