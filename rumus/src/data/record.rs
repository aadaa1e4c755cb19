//! Record files (`.rrec`): many variable-length records (encoded samples, images, token
//! sequences) in one file, written once by an append-only [`RecordWriter`] and read with O(1)
//! random access by a [`RecordFile`]. Opening costs one pass over the index, not over the data,
//! and a loader that shuffles reads only the records it draws, so a dataset larger than memory
//! works like a small one. [`RecordDataset`] makes a file a [`Dataset`].
//!
//! [`RecordFile::open`] reads records with positioned reads, so a file truncated or rewritten
//! by another process while open costs an `Err`, not the process; the memory-mapped reader,
//! [`RecordFile::open_mapped`], saves a copy per record but is `unsafe` for that reason.
//!
//! Every record carries a CRC-32, and so does the index of record offsets: a corrupt or
//! truncated file is an error naming the file and the record, never a panic or wrong bytes.
//!
//! # Layout
//!
//! All integers are little-endian.
//!
//! ```text
//! header    magic b"RUMUSREC"                              8 bytes
//!           format version (u32), currently 1              4 bytes
//! record 0  payload length n (u64)                         8 bytes
//!           CRC-32 of the payload (u32)                    4 bytes
//!           payload                                        n bytes
//! record 1  ...
//! index     file offset of each record's length field (u64), one per record
//! footer    offset of the index (u64)                      8 bytes
//!           record count (u64)                             8 bytes
//!           CRC-32 of the index bytes (u32)                4 bytes
//!           magic b"RRECINDX"                              8 bytes
//! ```
//!
//! Records follow one another without gaps: record 0 starts right after the header, each next
//! one where the previous one ends, and the index right after the last one. The reader checks
//! this, so a record's extent is known from the index alone and a stored length that disagrees
//! with it is caught before the checksum is even computed.
//!
//! The index and footer go last because the writer streams: it cannot know the record count
//! until [`RecordWriter::finish`]. The writer streams into a temporary file that replaces the
//! destination only once finished, so a writer that did not finish (a crash, a killed job, an
//! error, a forgotten `finish`) leaves the previous file as it was. A file without a footer
//! (truncated in a copy, or a leftover temporary file opened by hand) is refused, saying so,
//! instead of guessing where the records end.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use memmap2::Mmap;

use super::dataset::{Dataset, index_error};
use super::record_source::{FileSource, RecordSource};
use crate::error::{Error, Result};
use crate::io::AtomicFile;

/// First bytes of every record file.
const MAGIC: [u8; 8] = *b"RUMUSREC";
/// The format version this build writes and reads.
const VERSION: u32 = 1;
/// Magic and version.
const HEADER_LEN: usize = 12;
/// Length (u64) and CRC-32 (u32) in front of every payload.
const FRAME_LEN: usize = 12;
/// Last bytes of a finished record file.
const FOOTER_MAGIC: [u8; 8] = *b"RRECINDX";
/// Index offset (u64), record count (u64), index CRC-32 (u32) and the footer magic.
const FOOTER_LEN: usize = 28;
/// Bytes per index entry.
const ENTRY_LEN: usize = 8;

fn format_error(name: &str, message: impl Into<String>) -> Error {
    Error::Format {
        path: name.to_string(),
        message: message.into(),
    }
}

fn io_error(name: &str, what: &str, error: &std::io::Error) -> Error {
    Error::Io {
        path: name.to_string(),
        message: format!("{what}: {error}"),
    }
}

/// The u64 at `at`, or `None` when it does not lie inside `bytes`.
fn read_u64(bytes: &[u8], at: usize) -> Option<u64> {
    let raw = bytes.get(at..at.checked_add(8)?)?;
    Some(u64::from_le_bytes(raw.try_into().ok()?))
}

/// The u32 at `at`, or `None` when it does not lie inside `bytes`.
fn read_u32(bytes: &[u8], at: usize) -> Option<u32> {
    let raw = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes(raw.try_into().ok()?))
}

/// Writes a record file front to back. Records go through a buffer to a temporary file next
/// to the destination (`<name>.tmp-<pid>-<n>`, as [`write_atomic`](crate::io::write_atomic)
/// does); the index is kept in memory (8 bytes a record) and written by [`finish`], which
/// syncs the file to disk and renames it over the destination.
///
/// Until [`finish`] succeeds the destination is untouched: an existing file there stays
/// complete and readable (a [`RecordFile`] already open on it keeps reading the old records
/// even after the rename). Dropping a writer without calling [`finish`], or a failed write,
/// removes the temporary file; only a killed process leaves one behind.
///
/// [`finish`]: RecordWriter::finish
pub struct RecordWriter {
    out: BufWriter<AtomicFile>,
    name: String,
    /// File offset of each record's frame.
    offsets: Vec<u64>,
    /// Bytes written so far (where the next frame starts).
    position: u64,
    /// Set when a write failed: what is on disk is then unknown, so later appends and
    /// `finish` refuse to go on rather than write an index that points at garbage.
    failed: bool,
}

impl RecordWriter {
    /// Starts a record file that will replace `path` on [`RecordWriter::finish`], and writes
    /// the header.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let mut out = BufWriter::new(AtomicFile::create(path)?);
        let mut header = [0u8; HEADER_LEN];
        header[..8].copy_from_slice(&MAGIC);
        header[8..].copy_from_slice(&VERSION.to_le_bytes());
        out.write_all(&header)
            .map_err(|e| io_error(&name, "cannot write the header", &e))?;
        Ok(RecordWriter {
            out,
            name,
            offsets: Vec::new(),
            position: HEADER_LEN as u64,
            failed: false,
        })
    }

    /// Appends one record (any bytes, including none) and returns its index.
    pub fn append(&mut self, payload: &[u8]) -> Result<u64> {
        self.check_usable()?;
        let index = self.offsets.len() as u64;
        let len = payload.len() as u64;
        let next = self
            .position
            .checked_add(FRAME_LEN as u64)
            .and_then(|p| p.checked_add(len))
            .ok_or_else(|| {
                format_error(&self.name, "the file would exceed 2^64 bytes".to_string())
            })?;
        let mut frame = [0u8; FRAME_LEN];
        frame[..8].copy_from_slice(&len.to_le_bytes());
        frame[8..].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
        let written = self
            .out
            .write_all(&frame)
            .and_then(|()| self.out.write_all(payload));
        if let Err(e) = written {
            self.failed = true;
            return Err(io_error(
                &self.name,
                &format!("cannot write record {index}"),
                &e,
            ));
        }
        self.offsets.push(self.position);
        self.position = next;
        Ok(index)
    }

    /// Number of records appended so far.
    pub fn len(&self) -> usize {
        self.offsets.len()
    }

    /// Whether no record has been appended yet.
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }

    /// Writes the index and footer, flushes, syncs the file to disk and moves it to the
    /// destination, so that once this returns `Ok` the file is complete even if the machine
    /// loses power. On an error the destination is as it was before the writer was created.
    pub fn finish(mut self) -> Result<()> {
        self.check_usable()?;
        let name = self.name.clone();
        let fail = |what: &str, e: &std::io::Error| io_error(&name, what, e);
        let mut hasher = crc32fast::Hasher::new();
        for offset in &self.offsets {
            let entry = offset.to_le_bytes();
            hasher.update(&entry);
            self.out
                .write_all(&entry)
                .map_err(|e| fail("cannot write the index", &e))?;
        }
        let mut footer = [0u8; FOOTER_LEN];
        footer[..8].copy_from_slice(&self.position.to_le_bytes());
        footer[8..16].copy_from_slice(&(self.offsets.len() as u64).to_le_bytes());
        footer[16..20].copy_from_slice(&hasher.finalize().to_le_bytes());
        footer[20..].copy_from_slice(&FOOTER_MAGIC);
        self.out
            .write_all(&footer)
            .map_err(|e| fail("cannot write the footer", &e))?;
        let file = self
            .out
            .into_inner()
            .map_err(|e| fail("cannot flush the file", e.error()))?;
        file.commit()
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(format_error(
                &self.name,
                "an earlier write to this record file failed; the file is incomplete, write it again",
            ));
        }
        Ok(())
    }
}

impl fmt::Debug for RecordWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordWriter")
            .field("name", &self.name)
            .field("records", &self.offsets.len())
            .finish()
    }
}

/// A finished record file. `S` is where its bytes come from (see [`RecordSource`]): the file
/// itself, read with positioned reads, for [`RecordFile::open`]; a memory map for
/// [`RecordFile::open_mapped`]; anything byte-like (a `Vec<u8>`, a `&[u8]`) for
/// [`RecordFile::from_bytes`], which is what tests and fuzzing use.
///
/// Opening checks the header, the footer, the index checksum and that the index describes
/// records laid end to end; [`get`](RecordFile::get) checks one record's frame and checksum.
/// A file changed after opening therefore gives an error naming the record (and, where it
/// shrank, saying so), never wrong bytes.
pub struct RecordFile<S = FileSource> {
    source: S,
    name: String,
    count: usize,
    index_offset: usize,
    /// The index, where reading it from `source` made a copy (a file read with positioned
    /// reads): kept, at 8 bytes a record, so that a record costs one read instead of two.
    /// `None` where the source lends its bytes, which then hold the index.
    index: Option<Vec<u8>>,
}

impl RecordFile<FileSource> {
    /// Opens the file at `path` and validates its layout. The index stays in memory (8 bytes
    /// a record) and each record is one positioned read into a buffer that
    /// [`get`](RecordFile::get) hands back owned; the operating system's page cache keeps
    /// the records read often in memory, as it would for a memory map.
    ///
    /// Another process truncating or rewriting the file while it is open makes the records
    /// it damaged errors (the file shrank, a checksum does not match); nothing crashes.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let source =
            FileSource::open(path).map_err(|e| io_error(&name, "cannot open the file", &e))?;
        RecordFile::from_source(source, &name)
    }
}

impl RecordFile<Mmap> {
    /// Maps the file at `path` into memory and validates its layout; records are then
    /// borrowed from the mapping, without a system call or a copy.
    ///
    /// # Safety
    ///
    /// Nothing may truncate or modify the file while the returned value (or a dataset
    /// sharing it) is alive. A truncated mapped file kills the process with `SIGBUS` on the
    /// first access past its new end (on Linux; other systems differ), and bytes modified
    /// underneath change the `&[u8]` slices this type lends out, which Rust assumes
    /// immutable. Replacing the file by renaming a new one over it, as [`RecordWriter`]
    /// does, is fine: the mapping keeps the old file. Where another process may rewrite the
    /// file in place, use [`RecordFile::open`].
    pub unsafe fn open_mapped(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| io_error(&name, "cannot open the file", &e))?;
        let len = file
            .metadata()
            .map_err(|e| io_error(&name, "cannot read the file's size", &e))?
            .len();
        if len == 0 {
            // Mapping zero bytes is an error on some systems.
            return Err(empty_file_error(&name));
        }
        // SAFETY: the caller promises that nothing modifies or truncates the file while it
        // is mapped (this function's contract), which is what `Mmap::map` requires. Every
        // read still goes through bounds-checked slicing.
        let map = unsafe { Mmap::map(&file) }
            .map_err(|e| io_error(&name, "cannot memory-map the file", &e))?;
        RecordFile::from_source(map, &name)
    }
}

impl<B: AsRef<[u8]>> RecordFile<B> {
    /// Validates `bytes` as a record file; `name` stands for the file in error messages.
    pub fn from_bytes(bytes: B, name: &str) -> Result<Self> {
        RecordFile::from_source(bytes, name)
    }
}

impl<S: RecordSource> RecordFile<S> {
    /// Validates the bytes of `source` as a record file; `name` stands for the file in error
    /// messages.
    pub fn from_source(source: S, name: &str) -> Result<Self> {
        let (index_offset, count, index) = check_layout(&source, name)?;
        let index = match index {
            Cow::Owned(copy) => Some(copy),
            Cow::Borrowed(_) => None,
        };
        Ok(RecordFile {
            source,
            name: name.to_string(),
            count,
            index_offset,
            index,
        })
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the file holds no records.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The file's name as used in error messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The payload of record `index`: borrowed from a source held in memory, owned when read
    /// from a file. Finding it costs two index lookups whatever the record count; the
    /// payload's checksum is verified on every call, so corruption that happened after
    /// opening is caught too.
    pub fn get(&self, index: usize) -> Result<Cow<'_, [u8]>> {
        if index >= self.count {
            return Err(index_error("RecordFile::get", index, self.count));
        }
        let (start, end, next) = self.extent(index)?;
        let payload_len = end
            .checked_sub(start)
            .and_then(|n| n.checked_sub(FRAME_LEN))
            .ok_or_else(|| {
                self.record_error(
                    index,
                    format!(
                        "its frame at offset {start} does not fit before {next} at offset {end}: the file is corrupted"
                    ),
                )
            })?;
        let record = self
            .source
            .read(start, FRAME_LEN + payload_len)
            .map_err(|e| self.read_error(index, &e))?;
        let (frame, payload) = record.split_at(FRAME_LEN);
        let stored_len = u64::from_le_bytes(frame[..8].try_into().unwrap_or_default());
        let stored_crc = u32::from_le_bytes(frame[8..].try_into().unwrap_or_default());
        if stored_len != payload_len as u64 {
            return Err(self.record_error(
                index,
                format!(
                    "stored length {stored_len} does not match the {payload_len} bytes between its frame and {next}: the file is corrupted"
                ),
            ));
        }
        let computed = crc32fast::hash(payload);
        if computed != stored_crc {
            return Err(self.record_error(
                index,
                format!(
                    "checksum mismatch (stored 0x{stored_crc:08x}, computed 0x{computed:08x}): the file is corrupted"
                ),
            ));
        }
        Ok(without_frame(record))
    }

    /// Record `index` decoded by `decode` (e.g. [`Sample::from_bytes`]). A record that does
    /// not decode is an error naming the file and the record, `data.rrec: record 17:
    /// truncated: ...`, which the decoder alone, handed only bytes, cannot say.
    ///
    /// [`Sample::from_bytes`]: super::Sample::from_bytes
    pub fn decode<T>(&self, index: usize, decode: impl FnOnce(&[u8]) -> Result<T>) -> Result<T> {
        let payload = self.get(index)?;
        decode(&payload).map_err(|e| self.record_error(index, decoding_problem(e)))
    }

    /// Every record in order.
    pub fn iter(&self) -> impl Iterator<Item = Result<Cow<'_, [u8]>>> + '_ {
        (0..self.count).map(|i| self.get(i))
    }

    /// Where record `index` starts and ends, read from its index entry and the next one
    /// (validated when the file was opened, but read defensively in case the file changed
    /// since), and what follows it, for error messages.
    fn extent(&self, index: usize) -> Result<(usize, usize, String)> {
        let last = index + 1 == self.count;
        let entries = if last { 1 } else { 2 };
        // `index < count` and the index lies inside the file, so this cannot overflow.
        let (at, len) = (index * ENTRY_LEN, entries * ENTRY_LEN);
        let bytes = match &self.index {
            Some(copy) => Cow::Borrowed(copy.get(at..at + len).unwrap_or_default()),
            None => (self.source)
                .read(self.index_offset + at, len)
                .map_err(|e| self.read_error(index, &e))?,
        };
        let offset = |i: usize| {
            read_u64(&bytes, i * ENTRY_LEN)
                .and_then(|o| usize::try_from(o).ok())
                .unwrap_or(usize::MAX)
        };
        Ok(if last {
            (offset(0), self.index_offset, "the index".to_string())
        } else {
            (offset(0), offset(1), format!("record {}", index + 1))
        })
    }

    /// A failed read of record `index`: bytes missing from the file are a damaged file,
    /// anything else a failure of the device underneath.
    fn read_error(&self, index: usize, error: &std::io::Error) -> Error {
        if error.kind() == std::io::ErrorKind::UnexpectedEof {
            self.record_error(index, error)
        } else {
            io_error(&self.name, &format!("cannot read record {index}"), error)
        }
    }

    fn record_error(&self, index: usize, message: impl fmt::Display) -> Error {
        format_error(&self.name, format!("record {index}: {message}"))
    }
}

/// The payload of a record read with its frame.
fn without_frame(record: Cow<'_, [u8]>) -> Cow<'_, [u8]> {
    match record {
        Cow::Borrowed(bytes) => Cow::Borrowed(&bytes[FRAME_LEN..]),
        Cow::Owned(mut bytes) => {
            bytes.drain(..FRAME_LEN);
            Cow::Owned(bytes)
        }
    }
}

impl<B> fmt::Debug for RecordFile<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordFile")
            .field("name", &self.name)
            .field("records", &self.count)
            .finish()
    }
}

/// What a decoder's error says is wrong with the bytes it was handed. A format error's own
/// name for them (the sample codec says `<sample>`) gives way to the file and record that
/// [`RecordFile::decode`] names around it.
fn decoding_problem(error: Error) -> String {
    match error {
        Error::Format { message, .. } => message,
        other => other.to_string(),
    }
}

fn empty_file_error(name: &str) -> Error {
    format_error(
        name,
        "the file is empty (0 bytes): it is truncated, or its writer never wrote the header",
    )
}

/// Checks everything about a record file that does not depend on one record, and returns
/// where the index starts, how many records there are and the index's bytes. Reads the
/// header, the footer and the index, nothing else.
fn check_layout<'s>(
    source: &'s impl RecordSource,
    name: &str,
) -> Result<(usize, usize, Cow<'s, [u8]>)> {
    let len = source.len();
    if len == 0 {
        return Err(empty_file_error(name));
    }
    // Every read below lies inside the length at opening; one can still fail where the file
    // shrinks meanwhile.
    let read = |at: usize, n: usize| {
        source.read(at, n).map_err(|e| {
            if e.kind() == std::io::ErrorKind::UnexpectedEof {
                format_error(name, e.to_string())
            } else {
                io_error(name, "cannot read the file", &e)
            }
        })
    };
    let header = read(0, len.min(HEADER_LEN))?;
    let magic_len = len.min(MAGIC.len());
    if header.get(..magic_len) != MAGIC.get(..magic_len) {
        return Err(format_error(
            name,
            "not a record file (the first bytes are not the magic \"RUMUSREC\")",
        ));
    }
    let Some(version) = read_u32(&header, MAGIC.len()) else {
        return Err(format_error(
            name,
            format!("truncated: {len} bytes, shorter than the {HEADER_LEN}-byte header"),
        ));
    };
    if version != VERSION {
        return Err(format_error(
            name,
            format!(
                "unsupported record file version {version} (this build of rumus reads version {VERSION})"
            ),
        ));
    }
    let footer = match len.checked_sub(FOOTER_LEN).filter(|&s| s >= HEADER_LEN) {
        Some(start) => Some((start, read(start, FOOTER_LEN)?)),
        None => None,
    };
    let Some((footer_start, footer)) = footer.filter(|(_, f)| f[20..] == FOOTER_MAGIC) else {
        return Err(format_error(
            name,
            format!(
                "no index footer: the writer did not finish, or the file is truncated ({len} bytes; a finished file ends with the magic \"RRECINDX\")"
            ),
        ));
    };
    let (Some(index_offset), Some(count), Some(stored_crc)) = (
        read_u64(&footer, 0),
        read_u64(&footer, 8),
        read_u32(&footer, 16),
    ) else {
        // Unreachable: the footer was read whole.
        return Err(format_error(name, "the index footer cannot be read"));
    };
    let index_end = count
        .checked_mul(ENTRY_LEN as u64)
        .and_then(|n| n.checked_add(index_offset));
    if index_end != Some(footer_start as u64) || index_offset < HEADER_LEN as u64 {
        return Err(format_error(
            name,
            format!(
                "the index footer is inconsistent: an index of {count} records at offset {index_offset} does not end where the footer starts (offset {footer_start}): the file is corrupted or truncated"
            ),
        ));
    }
    // Both are below the file length now, so they fit in usize.
    let (index_offset, count) = (index_offset as usize, count as usize);
    let index = read(index_offset, footer_start - index_offset)?;
    let computed = crc32fast::hash(&index);
    if computed != stored_crc {
        return Err(format_error(
            name,
            format!(
                "index checksum mismatch (stored 0x{stored_crc:08x}, computed 0x{computed:08x}): the file is corrupted"
            ),
        ));
    }
    if count == 0 && index_offset != HEADER_LEN {
        return Err(format_error(
            name,
            format!(
                "the index lists no records but starts at offset {index_offset}, not right after the header: the file is corrupted"
            ),
        ));
    }
    // The index passed its checksum, so a bad entry here means a faulty writer rather than
    // damage; it is checked all the same, since `get` relies on it.
    let mut previous: Option<u64> = None;
    for (i, entry) in index.chunks_exact(ENTRY_LEN).enumerate() {
        let offset = u64::from_le_bytes(entry.try_into().unwrap_or_default());
        let earliest = match previous {
            None => HEADER_LEN as u64,
            Some(p) => p.saturating_add(FRAME_LEN as u64),
        };
        let misplaced = if previous.is_none() {
            offset != earliest
        } else {
            offset < earliest
        };
        let room = offset.checked_add(FRAME_LEN as u64);
        if misplaced || room.is_none_or(|end| end > index_offset as u64) {
            return Err(format_error(
                name,
                format!(
                    "record {i}: its index entry (offset {offset}) is out of place (expected at least {earliest}, the first record exactly {HEADER_LEN}, each leaving its {FRAME_LEN}-byte frame before the index at {index_offset}): the file is corrupted"
                ),
            ));
        }
        previous = Some(offset);
    }
    Ok((index_offset, count, index))
}

/// A record file as a [`Dataset`] of owned payloads (`Vec<u8>`: loader workers need items
/// that do not borrow the file; read from a file they are the buffers read into, not copies).
/// Decode them with [`RecordDataset::decode`], e.g.
/// `RecordDataset::open(path)?.decode(Sample::from_bytes)`, whose errors name the file and
/// the record (a `map` over the payloads works too, but its errors know only the bytes).
///
/// The file sits in an [`Arc`], so clones of the dataset (and loader workers) share one open
/// file.
pub struct RecordDataset<S = FileSource> {
    file: Arc<RecordFile<S>>,
}

impl RecordDataset<FileSource> {
    /// Opens the record file at `path` (see [`RecordFile::open`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Ok(RecordDataset::new(RecordFile::open(path)?))
    }
}

impl<S> RecordDataset<S> {
    /// A dataset whose items are the records of `file`, copied out as bytes.
    pub fn new(file: RecordFile<S>) -> Self {
        RecordDataset {
            file: Arc::new(file),
        }
    }

    /// A dataset over a file that is also used elsewhere.
    pub fn from_shared(file: Arc<RecordFile<S>>) -> Self {
        RecordDataset { file }
    }

    /// The underlying record file.
    pub fn file(&self) -> &Arc<RecordFile<S>> {
        &self.file
    }

    /// The records decoded by `decode`, as a dataset of what it returns; see
    /// [`RecordFile::decode`] for the errors. A record held in memory (a mapped file) is
    /// decoded where it lies, without first copying it out.
    pub fn decode<F, T>(self, decode: F) -> DecodedRecords<S, F>
    where
        F: Fn(&[u8]) -> Result<T> + Send + Sync,
    {
        DecodedRecords {
            file: self.file,
            decode,
        }
    }
}

/// An index past the end of `file`, reported as the dataset's.
fn check_index<S: RecordSource>(file: &RecordFile<S>, index: usize) -> Result<()> {
    if index >= file.len() {
        return Err(index_error("RecordDataset::get", index, file.len()));
    }
    Ok(())
}

impl<S> Clone for RecordDataset<S> {
    fn clone(&self) -> Self {
        RecordDataset {
            file: Arc::clone(&self.file),
        }
    }
}

impl<S> fmt::Debug for RecordDataset<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RecordDataset").field(&self.file).finish()
    }
}

impl<S: RecordSource + Send + Sync> Dataset for RecordDataset<S> {
    type Item = Vec<u8>;

    fn len(&self) -> usize {
        self.file.len()
    }

    fn get(&self, index: usize) -> Result<Vec<u8>> {
        check_index(&self.file, index)?;
        self.file.get(index).map(Cow::into_owned)
    }
}

/// See [`RecordDataset::decode`].
pub struct DecodedRecords<S, F> {
    file: Arc<RecordFile<S>>,
    decode: F,
}

impl<S, F> fmt::Debug for DecodedRecords<S, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DecodedRecords").field(&self.file).finish()
    }
}

impl<S, F, T> Dataset for DecodedRecords<S, F>
where
    S: RecordSource + Send + Sync,
    F: Fn(&[u8]) -> Result<T> + Send + Sync,
    T: Send + 'static,
{
    type Item = T;

    fn len(&self) -> usize {
        self.file.len()
    }

    fn get(&self, index: usize) -> Result<T> {
        check_index(&self.file, index)?;
        self.file.decode(index, &self.decode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record file assembled by hand: `area` between the header and the index, and an
    /// index of `offsets` with a correct checksum.
    fn assemble(area: &[u8], offsets: &[u64]) -> Vec<u8> {
        let mut bytes = MAGIC.to_vec();
        bytes.extend(VERSION.to_le_bytes());
        bytes.extend(area);
        let index_offset = bytes.len() as u64;
        let index: Vec<u8> = offsets.iter().flat_map(|o| o.to_le_bytes()).collect();
        bytes.extend(&index);
        bytes.extend(index_offset.to_le_bytes());
        bytes.extend((offsets.len() as u64).to_le_bytes());
        bytes.extend(crc32fast::hash(&index).to_le_bytes());
        bytes.extend(FOOTER_MAGIC);
        bytes
    }

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut bytes = (payload.len() as u64).to_le_bytes().to_vec();
        bytes.extend(crc32fast::hash(payload).to_le_bytes());
        bytes.extend(payload);
        bytes
    }

    fn open_err(bytes: Vec<u8>) -> String {
        RecordFile::from_bytes(bytes, "mem.rrec")
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn reads_a_hand_assembled_file() {
        let mut area = frame(b"abc");
        area.extend(frame(b""));
        area.extend(frame(b"xy"));
        let file = RecordFile::from_bytes(assemble(&area, &[12, 27, 39]), "mem.rrec").unwrap();
        assert_eq!(file.len(), 3);
        assert_eq!(*file.get(2).unwrap(), *b"xy");
        assert_eq!(*file.get(1).unwrap(), *b"");
        assert_eq!(*file.get(0).unwrap(), *b"abc");
        assert!(matches!(
            file.get(3),
            Err(Error::IndexOutOfRange { index: 3, .. })
        ));
        let empty = RecordFile::from_bytes(assemble(&[], &[]), "mem.rrec").unwrap();
        assert!(empty.is_empty());
    }

    #[test]
    fn header_errors_are_clear() {
        assert!(open_err(Vec::new()).contains("empty (0 bytes)"));
        assert!(open_err(b"RUMUS".to_vec()).contains("truncated"));
        assert!(open_err(b"PK\x03\x04 not a record file at all".to_vec()).contains("magic"));
        let mut future = assemble(&[], &[]);
        future[8] = 2;
        let err = open_err(future);
        assert!(
            err.contains("version 2") && err.contains("reads version 1"),
            "{err}"
        );
        let mut header_only = MAGIC.to_vec();
        header_only.extend(VERSION.to_le_bytes());
        let err = open_err(header_only);
        assert!(err.contains("no index footer"), "{err}");
    }

    #[test]
    fn hostile_footers_do_not_overflow() {
        let valid = assemble(&frame(b"abc"), &[12]);
        let footer = valid.len() - FOOTER_LEN;
        for (field, value) in [(0, u64::MAX), (8, u64::MAX), (8, u64::MAX / 8 + 1), (0, 0)] {
            let mut bytes = valid.clone();
            bytes[footer + field..footer + field + 8].copy_from_slice(&value.to_le_bytes());
            let err = open_err(bytes);
            assert!(err.contains("footer is inconsistent"), "{err}");
        }
    }

    #[test]
    fn misplaced_index_entries_are_rejected() {
        let mut area = frame(b"abc");
        area.extend(frame(b"de"));
        // First record not at the header's end; decreasing; too close; past the index.
        for offsets in [[13, 27], [27, 12], [12, 20], [12, 40]] {
            let err = open_err(assemble(&area, &offsets));
            assert!(err.contains("out of place"), "{offsets:?}: {err}");
        }
        // Bytes between the header and an empty index.
        let err = open_err(assemble(b"junk", &[]));
        assert!(err.contains("lists no records"), "{err}");
    }

    #[test]
    fn record_errors_name_the_file_and_record() {
        let mut area = frame(b"abc");
        area.extend(frame(b"defg"));
        let mut bytes = assemble(&area, &[12, 27]);
        bytes[12 + 15 + 12] ^= 1; // first payload byte of record 1
        let file = RecordFile::from_bytes(bytes, "mem.rrec").unwrap();
        assert_eq!(*file.get(0).unwrap(), *b"abc");
        let err = file.get(1).unwrap_err().to_string();
        assert!(
            err.starts_with("mem.rrec: record 1: checksum mismatch"),
            "{err}"
        );
        // A length that disagrees with the index.
        let mut bytes = assemble(&area, &[12, 27]);
        bytes[12] = 4;
        let err = RecordFile::from_bytes(bytes, "mem.rrec")
            .unwrap()
            .get(0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("record 0: stored length 4"), "{err}");
    }
}
