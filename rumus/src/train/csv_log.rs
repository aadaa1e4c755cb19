//! The per-epoch numbers as a CSV file, one row per epoch, written as each epoch ends (each
//! row goes to the file in one unbuffered write), so a run that crashes keeps every row so
//! far. Loads in pandas (`pd.read_csv`), a spreadsheet, or Lightning's `CSVLogger` readers.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::summary::EpochSummary;
use crate::error::{Error, Result};

/// An open CSV log.
pub(super) struct CsvLog {
    file: File,
    path: PathBuf,
}

impl CsvLog {
    /// Creates (or truncates) `path` and writes `header` and the rows of `history`: the
    /// epochs a resumed run already has. Rows a crashed run wrote after its checkpoint are
    /// dropped this way rather than repeated, since the epochs will be trained again.
    pub(super) fn create(path: &Path, header: &str, history: &[EpochSummary]) -> Result<Self> {
        let file = File::create(path).map_err(|e| io_error(path, "cannot create", e))?;
        let mut log = CsvLog {
            file,
            path: path.to_path_buf(),
        };
        log.write(&format!("{header}\n"))?;
        for summary in history {
            log.append(summary)?;
        }
        Ok(log)
    }

    /// Writes the row of `summary`.
    pub(super) fn append(&mut self, summary: &EpochSummary) -> Result<()> {
        self.write(&row(summary))
    }

    fn write(&mut self, text: &str) -> Result<()> {
        self.file
            .write_all(text.as_bytes())
            .map_err(|e| io_error(&self.path, "cannot write", e))
    }
}

/// `epoch,train_loss,...` of one epoch; numbers in Rust's shortest round-trip form.
fn row(s: &EpochSummary) -> String {
    let values: Vec<String> = s
        .named_values()
        .iter()
        .map(|(_, v)| v.to_string())
        .collect();
    format!("{},{},{},{}\n", s.epoch, values.join(","), s.lr, s.seconds)
}

fn io_error(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        message: format!(
            "{what} the metrics CSV: {e}; check that the directory exists and is writable"
        ),
    }
}
