//! Record files. `record_reader`: any bytes, read from memory, open or give an error, every
//! record is a payload inside the file or an error, and decoding a payload as a sample never
//! panics. `record_file_open`: the same through a real file (`RecordFile::open`, positioned
//! reads), after the checksums have been recomputed the way `RecordWriter`
//! writes them, so that mutated lengths, offsets and payloads get past the CRCs.

use rumus::data::{RecordFile, RecordSource, Sample};

use super::scratch::Scratch;

/// Layout constants of the format (see `rumus/src/data/record.rs`).
const HEADER_LEN: usize = 12;
const FRAME_LEN: usize = 12;
const FOOTER_LEN: usize = 28;
const FOOTER_MAGIC: &[u8; 8] = b"RRECINDX";

pub fn from_bytes(bytes: &[u8]) -> rumus::Result<()> {
    let as_sample = Sample::from_bytes(bytes);
    if let Ok(sample) = as_sample {
        round_trip(&sample);
    }
    let file = RecordFile::from_bytes(bytes, "fuzz.rrec")?;
    read_all(&file, bytes.len())
}

pub fn open(bytes: &[u8]) -> rumus::Result<()> {
    let mut bytes = bytes.to_vec();
    fix_checksums(&mut bytes);
    let scratch = Scratch::new()?;
    let path = scratch.write("fuzz.rrec", &bytes)?;
    let file = RecordFile::open(&path)?;
    read_all(&file, bytes.len())
}

/// Reads every record of `file` (`file_len` bytes long) and decodes it as a sample; the
/// first error, if any.
pub fn read_all<S: RecordSource>(file: &RecordFile<S>, file_len: usize) -> rumus::Result<()> {
    let mut first_error = None;
    for i in 0..file.len() {
        let decoded = file.get(i).and_then(|payload| {
            assert!(
                payload.len() <= file_len,
                "record {i} is longer than the file"
            );
            Sample::from_bytes(&payload)
        });
        match decoded {
            Ok(sample) => round_trip(&sample),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    assert!(file.get(file.len()).is_err());
    first_error.map_or(Ok(()), Err)
}

/// A decoded sample encodes back to bytes that decode to the same sample.
fn round_trip(sample: &Sample) {
    let bytes = sample
        .try_to_bytes()
        .unwrap_or_else(|e| panic!("a decoded sample does not encode: {e}"));
    let again = Sample::from_bytes(&bytes)
        .unwrap_or_else(|e| panic!("an encoded sample does not decode: {e}"));
    // Debug rather than `==`: NaN values are equal here.
    assert_eq!(format!("{again:?}"), format!("{sample:?}"));
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
}

/// Rewrites every CRC-32 whose extent the file's own index and footer describe: each
/// record's (its payload runs from its frame to the next record, or to the index), then the
/// index's. Anything that does not describe an extent inside the file is left alone.
pub fn fix_checksums(bytes: &mut [u8]) {
    let len = bytes.len();
    let Some(footer) = len.checked_sub(FOOTER_LEN).filter(|&f| f >= HEADER_LEN) else {
        return;
    };
    if &bytes[footer + 20..] != FOOTER_MAGIC {
        return;
    }
    let (Some(index), Some(count)) = (u64_at(bytes, footer), u64_at(bytes, footer + 8)) else {
        return;
    };
    let index_end = count.checked_mul(8).and_then(|n| n.checked_add(index));
    if index_end != Some(footer as u64) {
        return;
    }
    let (index, count) = (index as usize, count as usize);
    let offsets: Vec<usize> = (0..count)
        .map(|i| u64_at(bytes, index + 8 * i).map_or(usize::MAX, |o| o as usize))
        .collect();
    for (i, &start) in offsets.iter().enumerate() {
        let end = offsets.get(i + 1).copied().unwrap_or(index);
        let Some(payload) = start
            .checked_add(FRAME_LEN)
            .filter(|&p| p <= end && end <= index)
        else {
            continue;
        };
        let crc = crc32fast::hash(&bytes[payload..end]);
        bytes[start + 8..payload].copy_from_slice(&crc.to_le_bytes());
    }
    let crc = crc32fast::hash(&bytes[index..footer]);
    bytes[footer + 16..footer + 20].copy_from_slice(&crc.to_le_bytes());
}
