//! Files for the readers that take a path: a fresh folder per input under the system's
//! temporary folder (`TMPDIR`; a RAM disk such as `/dev/shm` keeps fuzzing fast), removed
//! when the input is done. An input that crashes the fuzzer leaves its folder behind, with
//! the files that crashed it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT: AtomicU64 = AtomicU64::new(0);

pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    /// A new empty folder, unique to this process and call (tests run drivers in parallel).
    pub fn new() -> rumus::Result<Scratch> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("rumus-fuzz-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        Ok(Scratch { dir })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where a file called `name` goes.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes `bytes` to the file `name` and returns its path.
    pub fn write(&self, name: &str, bytes: &[u8]) -> rumus::Result<PathBuf> {
        let path = self.path(name);
        std::fs::write(&path, bytes).map_err(|e| io(&path, e))?;
        Ok(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn io(path: &Path, e: std::io::Error) -> rumus::Error {
    rumus::Error::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}
