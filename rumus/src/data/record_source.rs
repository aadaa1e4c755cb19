//! Where a [`RecordFile`](super::RecordFile) reads its bytes: bytes in memory (a `Vec<u8>`,
//! a `&[u8]`, a memory map), lent in place, or a [`FileSource`], an open file read with
//! positioned reads into buffers the reader owns.
//!
//! The file is the safe default because a memory map cannot survive the file shrinking under
//! it: on Linux, touching a mapped page past the new end kills the process with `SIGBUS`,
//! which no bounds check can catch. A read past the end of a file is an ordinary error, so
//! another process truncating or rewriting the file in place costs the reader an `Err`, not
//! its life.

use std::borrow::Cow;
use std::fs::File;
use std::io::{Error, ErrorKind, Result};
use std::path::Path;

/// Bytes a [`RecordFile`](super::RecordFile) can read at any offset.
///
/// A failed read is an [`std::io::Error`]: of kind [`ErrorKind::UnexpectedEof`] when the
/// bytes asked for are not (or no longer) in the source, which the record file reports as a
/// damaged file naming the record; any other kind is a failure of the device underneath.
pub trait RecordSource {
    /// The length of the source in bytes when it was opened.
    fn len(&self) -> usize;

    /// Whether the source held no bytes when it was opened.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Exactly the `len` bytes at offset `at`: lent where the source holds them in memory,
    /// read into a new buffer where it reads a file.
    fn read(&self, at: usize, len: usize) -> Result<Cow<'_, [u8]>>;
}

/// The error of a read of `at..at + len` that does not lie inside `size` bytes.
fn outside(at: usize, len: usize, size: usize) -> Error {
    let end = at.saturating_add(len);
    Error::new(
        ErrorKind::UnexpectedEof,
        format!(
            "bytes {at}..{end} lie outside the file ({size} bytes): it was modified or truncated while open"
        ),
    )
}

impl<B: AsRef<[u8]>> RecordSource for B {
    fn len(&self) -> usize {
        self.as_ref().len()
    }

    fn read(&self, at: usize, len: usize) -> Result<Cow<'_, [u8]>> {
        let bytes = self.as_ref();
        at.checked_add(len)
            .and_then(|end| bytes.get(at..end))
            .map(Cow::Borrowed)
            .ok_or_else(|| outside(at, len, bytes.len()))
    }
}

/// An open file read with positioned reads (`pread`), so that readers on several threads
/// share it without a seek position between them. Each read asks the operating system for
/// exactly the bytes wanted, and a file that shrank since it was opened is a read error
/// that says so, never a crash.
#[derive(Debug)]
pub struct FileSource {
    file: File,
    len: usize,
}

impl FileSource {
    /// Opens the file at `path` for reading and notes its length.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        let len = usize::try_from(len).map_err(|_| {
            Error::new(
                ErrorKind::FileTooLarge,
                format!("{len} bytes do not fit this machine's address space"),
            )
        })?;
        Ok(FileSource { file, len })
    }

    /// The error of a read that found the file shorter than when it was opened.
    fn shrank(&self, at: usize, len: usize) -> Error {
        let now = match self.file.metadata() {
            Ok(metadata) => metadata.len().to_string(),
            Err(e) => format!("an unknown number of ({e})"),
        };
        Error::new(
            ErrorKind::UnexpectedEof,
            format!(
                "bytes {at}..{} are gone: the file shrank from {} to {now} bytes while open: another process is rewriting it (write a new file and rename it over the old one, as RecordWriter does, and readers keep the old one)",
                at.saturating_add(len),
                self.len
            ),
        )
    }
}

impl RecordSource for FileSource {
    fn len(&self) -> usize {
        self.len
    }

    fn read(&self, at: usize, len: usize) -> Result<Cow<'_, [u8]>> {
        if at.checked_add(len).is_none_or(|end| end > self.len) {
            return Err(outside(at, len, self.len));
        }
        let mut buffer = vec![0u8; len];
        match read_exact_at(&self.file, &mut buffer, at as u64) {
            Ok(()) => Ok(Cow::Owned(buffer)),
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => Err(self.shrank(at, len)),
            Err(e) => Err(e),
        }
    }
}

#[cfg(unix)]
fn read_exact_at(file: &File, buffer: &mut [u8], at: u64) -> Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buffer, at)
}

#[cfg(windows)]
fn read_exact_at(file: &File, mut buffer: &mut [u8], mut at: u64) -> Result<()> {
    use std::os::windows::fs::FileExt;
    while !buffer.is_empty() {
        match file.seek_read(buffer, at) {
            Ok(0) => return Err(Error::from(ErrorKind::UnexpectedEof)),
            Ok(n) => {
                buffer = &mut buffer[n..];
                at += n as u64;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
