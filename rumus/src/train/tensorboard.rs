//! The per-epoch numbers as a TensorBoard event file, so `tensorboard --logdir DIR` plots
//! them beside PyTorch runs. Written by hand, without protobuf or TensorFlow crates: the
//! format is small.
//!
//! An event file is a sequence of TFRecords: `u64` length (little-endian), the masked
//! CRC-32C of those 8 bytes, the data, the masked CRC-32C of the data. Masking is
//! `((crc >> 15) | (crc << 17)) + 0xa282ead8`. Each record is a serialized `tensorflow.Event`
//! protobuf; the first one carries `file_version: "brain.Event:2"`, then one per epoch with
//! `wall_time`, `step` (the epoch) and a `Summary` of `simple_value` scalars:
//!
//! ```text
//! Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//! Summary { repeated Value value = 1; }
//! Value   { string tag = 1; float simple_value = 2; }
//! ```

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::summary::EpochSummary;
use crate::error::{Error, Result};

/// An open event file.
pub(super) struct TensorBoardLog {
    file: File,
    path: PathBuf,
}

impl TensorBoardLog {
    /// Creates `dir` if needed and a new event file in it (named as TensorFlow names them,
    /// `events.out.tfevents.<seconds>.<host>`, with `rumus.<process id>` as the host so two
    /// runs never share a file), and writes the file-version event.
    pub(super) fn create(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .map_err(|e| io_error(dir, "cannot create the directory", e))?;
        let seconds = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let name = format!("events.out.tfevents.{seconds}.rumus.{}", std::process::id());
        let path = dir.join(name);
        let file = File::create(&path).map_err(|e| io_error(&path, "cannot create", e))?;
        let mut log = TensorBoardLog { file, path };
        let mut event = Vec::new();
        put_double(&mut event, 1, wall_time());
        put_bytes(&mut event, 3, b"brain.Event:2");
        log.write_record(&event)?;
        Ok(log)
    }

    /// Writes the scalars of one epoch at step `summary.epoch`: `train/loss`,
    /// `train/<metric>`..., `eval/loss`, `eval/<metric>`... and `lr` (the CSV log's names
    /// with a `/` after the phase, which TensorBoard groups by).
    pub(super) fn append(&mut self, summary: &EpochSummary) -> Result<()> {
        let mut scalars: Vec<(String, f64)> = summary
            .named_values()
            .into_iter()
            .map(|(name, v)| (name.replacen('_', "/", 1), v))
            .collect();
        scalars.push(("lr".into(), summary.lr));
        let mut values = Vec::new();
        for (tag, value) in scalars {
            let mut entry = Vec::new();
            put_bytes(&mut entry, 1, tag.as_bytes());
            put_float(&mut entry, 2, value as f32);
            put_bytes(&mut values, 1, &entry);
        }
        let mut event = Vec::new();
        put_double(&mut event, 1, wall_time());
        put_varint_field(&mut event, 2, summary.epoch as u64);
        put_bytes(&mut event, 5, &values);
        self.write_record(&event)
    }

    /// One TFRecord, in one unbuffered write so a crash keeps every whole record before it.
    fn write_record(&mut self, data: &[u8]) -> Result<()> {
        let length = (data.len() as u64).to_le_bytes();
        let mut record = Vec::with_capacity(data.len() + 16);
        record.extend_from_slice(&length);
        record.extend_from_slice(&masked_crc32c(&length).to_le_bytes());
        record.extend_from_slice(data);
        record.extend_from_slice(&masked_crc32c(data).to_le_bytes());
        self.file
            .write_all(&record)
            .map_err(|e| io_error(&self.path, "cannot write", e))
    }
}

fn wall_time() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// A field key: the field number and the wire type (0 varint, 1 64-bit, 2 length-delimited,
/// 5 32-bit).
fn put_key(out: &mut Vec<u8>, field: u64, wire_type: u64) {
    put_varint(out, (field << 3) | wire_type);
}

fn put_varint_field(out: &mut Vec<u8>, field: u64, value: u64) {
    put_key(out, field, 0);
    put_varint(out, value);
}

fn put_double(out: &mut Vec<u8>, field: u64, value: f64) {
    put_key(out, field, 1);
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_float(out: &mut Vec<u8>, field: u64, value: f32) {
    put_key(out, field, 5);
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_key(out, field, 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord uses; a table built at
/// compile time, one byte per step (event files are small).
fn crc32c(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut crc = i as u32;
            let mut bit = 0;
            while bit < 8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0x82F6_3B78
                } else {
                    crc >> 1
                };
                bit += 1;
            }
            table[i] = crc;
            i += 1;
        }
        table
    };
    !bytes.iter().fold(!0u32, |crc, &b| {
        TABLE[((crc ^ b as u32) & 0xFF) as usize] ^ (crc >> 8)
    })
}

fn masked_crc32c(bytes: &[u8]) -> u32 {
    let crc = crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xA282_EAD8)
}

fn io_error(path: &Path, what: &str, e: std::io::Error) -> Error {
    Error::Io {
        path: path.display().to_string(),
        message: format!(
            "{what} the TensorBoard event file: {e}; check that the directory is writable"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check value of CRC-32C (RFC 3720, and every CRC catalogue): `crc32c("123456789")`
    /// is 0xE3069283; 32 zero bytes give 0x8A9136AA (RFC 3720, B.4).
    #[test]
    fn crc32c_matches_the_published_check_values() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
    }

    /// Protobuf's documented example: field 1 = 150 encodes as `08 96 01`.
    #[test]
    fn varints_follow_the_protobuf_encoding() {
        let mut out = Vec::new();
        put_varint_field(&mut out, 1, 150);
        assert_eq!(out, [0x08, 0x96, 0x01]);
    }
}
