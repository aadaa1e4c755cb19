//! A compact binary encoding of [`Sample`], so that samples can be stored one per record in a
//! record file (see [`record`](super::record)) and decoded by a dataset:
//! `RecordDataset::open(path)?.decode(Sample::from_bytes)`, whose errors then name the file and
//! the record ([`RecordDataset::decode`](super::RecordDataset::decode)).
//!
//! # Layout
//!
//! All integers are little-endian.
//!
//! ```text
//! version          u8, currently 1
//! input            rank (u32), `rank` dims (u32 each), product(dims) values (f32 each)
//! target tag       u8: 0 = a class, 1 = values
//! target           tag 0: the class (i64)
//!                  tag 1: rank, dims and values, as for the input
//! ```
//!
//! Nothing may follow the target. Decoding checks every length against the bytes that remain
//! (with checked arithmetic) before it allocates, so a hostile or corrupt encoding is an error,
//! never a panic or a huge allocation.
//!
//! Dims are stored as u32 (an axis of 2^32 or more f32 values would be over 16 GiB); the
//! value `u32::MAX` is reserved. A sample whose features cannot be encoded (a dim that does
//! not fit, or dims that do not describe the values, possible only by filling the public
//! fields of [`Features`] by hand) is refused by [`Sample::try_to_bytes`]; [`Sample::to_bytes`]
//! instead writes a marker that [`Sample::from_bytes`] rejects with the reason, so such a
//! sample can never come back as different data.

use super::sample::{Features, Sample, Target};
use crate::error::{Error, Result};

/// The encoding version this build writes and reads.
const VERSION: u8 = 1;
/// Leading byte of the marker `to_bytes` writes for a sample it cannot encode, followed by
/// the reason as UTF-8.
const INVALID: u8 = 0;
const TAG_CLASS: u8 = 0;
const TAG_VALUES: u8 = 1;
/// A dim too large for u32, which no encoding may contain.
const RESERVED_DIM: u32 = u32::MAX;

/// The name errors of this codec give in place of a file.
const CONTEXT: &str = "<sample>";

fn codec_error(message: impl Into<String>) -> Error {
    Error::Format {
        path: CONTEXT.into(),
        message: message.into(),
    }
}

impl Sample {
    /// The encoding described in [`sample_codec`](super::sample_codec). Never fails: a sample
    /// that cannot be encoded becomes a marker that [`Sample::from_bytes`] rejects, naming the
    /// problem; use [`Sample::try_to_bytes`] to get that error when writing instead.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.try_to_bytes().unwrap_or_else(|e| {
            let mut marker = vec![INVALID];
            marker.extend(e.to_string().into_bytes());
            marker
        })
    }

    /// The encoding, or an error when a features' dims do not fit in u32 (below `u32::MAX`)
    /// or do not describe its values.
    pub fn try_to_bytes(&self) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(encoded_len(self));
        out.push(VERSION);
        write_features(&mut out, &self.input, "the input")?;
        match &self.target {
            Target::Class(class) => {
                out.push(TAG_CLASS);
                out.extend(class.to_le_bytes());
            }
            Target::Values(values) => {
                out.push(TAG_VALUES);
                write_features(&mut out, values, "the target")?;
            }
        }
        Ok(out)
    }

    /// Decodes [`Sample::to_bytes`]'s encoding, rejecting anything truncated, oversized or
    /// inconsistent. Handed only bytes, its errors call them `<sample>`; decoding through
    /// [`RecordFile::decode`](super::RecordFile::decode) puts the file and record in its place.
    pub fn from_bytes(bytes: &[u8]) -> Result<Sample> {
        let mut reader = Reader { bytes, at: 0 };
        match reader.u8("the version byte")? {
            VERSION => {}
            INVALID => {
                let reason = String::from_utf8_lossy(bytes.get(1..).unwrap_or_default());
                return Err(codec_error(format!(
                    "this sample could not be encoded when it was written: {reason}"
                )));
            }
            v => {
                return Err(codec_error(format!(
                    "unsupported sample encoding version {v} (this build of rumus reads version {VERSION}); is this a sample?"
                )));
            }
        }
        let input = reader.features("the input")?;
        let target = match reader.u8("the target tag")? {
            TAG_CLASS => Target::Class(i64::from_le_bytes(reader.array("the class")?)),
            TAG_VALUES => Target::Values(reader.features("the target")?),
            tag => {
                return Err(codec_error(format!(
                    "unknown target tag {tag} at byte {} (0 = class, 1 = values): the encoding is corrupt",
                    reader.at - 1
                )));
            }
        };
        if reader.at != bytes.len() {
            return Err(codec_error(format!(
                "the sample ends at byte {} but the encoding has {} bytes: it is corrupt, or not a sample",
                reader.at,
                bytes.len()
            )));
        }
        Ok(Sample { input, target })
    }
}

/// The encoded size, assuming the sample can be encoded (only a capacity hint).
fn encoded_len(sample: &Sample) -> usize {
    let features = |f: &Features| 4 + 4 * f.dims.len() + 4 * f.values.len();
    let target = match &sample.target {
        Target::Class(_) => 8,
        Target::Values(v) => features(v),
    };
    2 + features(&sample.input) + target
}

fn write_features(out: &mut Vec<u8>, features: &Features, what: &str) -> Result<()> {
    let rank = u32::try_from(features.dims.len())
        .map_err(|_| codec_error(format!("{what} has {} dims", features.dims.len())))?;
    let count = features
        .dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d));
    if count != Some(features.values.len()) {
        return Err(codec_error(format!(
            "{what} has dims {:?} but {} values; build features with `Features::new`, which checks this",
            features.dims,
            features.values.len()
        )));
    }
    out.extend(rank.to_le_bytes());
    for &dim in &features.dims {
        let dim = u32::try_from(dim).ok().filter(|&d| d != RESERVED_DIM);
        let dim = dim.ok_or_else(|| {
            codec_error(format!(
                "{what} has dims {:?}; each must be below {RESERVED_DIM} to be encoded",
                features.dims
            ))
        })?;
        out.extend(dim.to_le_bytes());
    }
    for value in &features.values {
        out.extend(value.to_le_bytes());
    }
    Ok(())
}

/// Reads an encoding front to back; every read checks what remains first.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        let remaining = self.bytes.len().saturating_sub(self.at);
        let taken = self
            .at
            .checked_add(n)
            .and_then(|end| self.bytes.get(self.at..end));
        let Some(taken) = taken else {
            return Err(codec_error(format!(
                "truncated: {what} needs {n} bytes at byte {}, only {remaining} remain",
                self.at
            )));
        };
        self.at += n;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let taken = self.take(N, what)?;
        taken
            .try_into()
            .map_err(|_| codec_error(format!("{what}: expected {N} bytes")))
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn features(&mut self, what: &str) -> Result<Features> {
        let rank = self.u32(&format!("the rank of {what}"))? as usize;
        let dim_bytes = rank.checked_mul(4).ok_or_else(|| {
            codec_error(format!("the rank {rank} of {what} is too large to encode"))
        })?;
        // Taken before anything is allocated, so `rank` is bounded by the input's length.
        let raw_dims = self.take(dim_bytes, &format!("the {rank} dims of {what}"))?;
        let mut dims = Vec::with_capacity(rank);
        for chunk in raw_dims.chunks_exact(4) {
            let dim = u32::from_le_bytes(chunk.try_into().unwrap_or_default());
            if dim == RESERVED_DIM {
                return Err(codec_error(format!(
                    "{what} has the reserved dim {RESERVED_DIM}: the encoding is corrupt"
                )));
            }
            dims.push(dim as usize);
        }
        let value_bytes = dims
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .and_then(|count| count.checked_mul(4))
            .ok_or_else(|| {
                codec_error(format!(
                    "dims {dims:?} of {what} hold more values than memory can: the encoding is corrupt"
                ))
            })?;
        let raw_values = self.take(value_bytes, &format!("the values of {what} {dims:?}"))?;
        let values = raw_values
            .chunks_exact(4)
            .map(|chunk| f32::from_le_bytes(chunk.try_into().unwrap_or_default()))
            .collect();
        Ok(Features { values, dims })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn features(dims: &[usize]) -> Features {
        let n = dims.iter().product::<usize>();
        Features::new((0..n).map(|i| i as f32 * 0.5 - 3.0).collect(), dims).unwrap()
    }

    fn samples() -> Vec<Sample> {
        vec![
            Sample::classified(features(&[1, 2, 3]), 7),
            Sample::classified(features(&[]), -1),
            Sample::classified(features(&[0, 5]), i64::MIN),
            Sample {
                input: features(&[4]),
                target: Target::Values(features(&[2, 2])),
            },
            Sample {
                input: Features::vector(vec![f32::NAN, f32::INFINITY, -0.0]),
                target: Target::Values(features(&[0])),
            },
        ]
    }

    fn same(a: &Sample, b: &Sample) -> bool {
        // Bitwise, so NaN payloads and -0.0 count.
        let bits = |f: &Features| {
            (
                f.dims.clone(),
                f.values.iter().map(|v| v.to_bits()).collect(),
            )
        };
        let target = |s: &Sample| match &s.target {
            Target::Class(c) => (Some(*c), None::<(Vec<usize>, Vec<u32>)>),
            Target::Values(v) => (None, Some(bits(v))),
        };
        bits(&a.input) == bits(&b.input) && target(a) == target(b)
    }

    #[test]
    fn round_trips() {
        for sample in samples() {
            let bytes = sample.to_bytes();
            assert_eq!(bytes.len(), encoded_len(&sample));
            let back = Sample::from_bytes(&bytes).unwrap();
            assert!(same(&sample, &back), "{sample:?} came back as {back:?}");
        }
        // Three axes, 1x2x3 input, class: 1 + 4 + 12 + 24 + 1 + 8 bytes.
        assert_eq!(samples()[0].to_bytes().len(), 50);
    }

    #[test]
    fn every_truncation_and_extension_is_an_error() {
        for sample in samples() {
            let bytes = sample.to_bytes();
            for len in 0..bytes.len() {
                let err = Sample::from_bytes(&bytes[..len]).unwrap_err().to_string();
                assert!(err.starts_with("<sample>: truncated"), "{err}");
            }
            let mut longer = bytes.clone();
            longer.push(0);
            let err = Sample::from_bytes(&longer).unwrap_err().to_string();
            assert!(err.contains("ends at byte"), "{err}");
        }
    }

    #[test]
    fn hostile_lengths_are_rejected_before_allocating() {
        let mut huge_rank = vec![VERSION];
        huge_rank.extend(u32::MAX.to_le_bytes());
        let err = Sample::from_bytes(&huge_rank).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{err}");

        let mut huge_dims = vec![VERSION];
        huge_dims.extend(4u32.to_le_bytes());
        for _ in 0..4 {
            huge_dims.extend((u32::MAX - 1).to_le_bytes());
        }
        let err = Sample::from_bytes(&huge_dims).unwrap_err().to_string();
        assert!(err.contains("more values than memory"), "{err}");

        let mut big_dims = vec![VERSION];
        big_dims.extend(2u32.to_le_bytes());
        big_dims.extend(1_000_000u32.to_le_bytes());
        big_dims.extend(1_000_000u32.to_le_bytes());
        let err = Sample::from_bytes(&big_dims).unwrap_err().to_string();
        assert!(
            err.contains("truncated") && err.contains("4000000000000"),
            "{err}"
        );

        let mut reserved = vec![VERSION];
        reserved.extend(1u32.to_le_bytes());
        reserved.extend(RESERVED_DIM.to_le_bytes());
        let err = Sample::from_bytes(&reserved).unwrap_err().to_string();
        assert!(err.contains("reserved"), "{err}");
    }

    #[test]
    fn bad_version_and_tag_are_errors() {
        let mut bytes = samples()[0].to_bytes();
        bytes[0] = 9;
        let err = Sample::from_bytes(&bytes).unwrap_err().to_string();
        assert!(err.contains("version 9"), "{err}");
        let mut bytes = samples()[0].to_bytes();
        bytes[41] = 5;
        let err = Sample::from_bytes(&bytes).unwrap_err().to_string();
        assert!(err.contains("unknown target tag 5 at byte 41"), "{err}");
        assert!(Sample::from_bytes(&[]).is_err());
    }

    #[test]
    fn unencodable_samples_never_come_back_as_other_data() {
        let inconsistent = Sample::classified(
            Features {
                values: vec![1.0; 3],
                dims: vec![2],
            },
            0,
        );
        let huge_empty = Sample::classified(
            Features {
                values: Vec::new(),
                dims: vec![0, u32::MAX as usize],
            },
            0,
        );
        for sample in [inconsistent, huge_empty] {
            let err = sample.try_to_bytes().unwrap_err().to_string();
            let decoded = Sample::from_bytes(&sample.to_bytes())
                .unwrap_err()
                .to_string();
            assert!(
                decoded.contains("could not be encoded") && decoded.contains(&err),
                "{decoded}"
            );
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = crate::rng::Generator::new(11);
        let valid = samples()[3].to_bytes();
        for _ in 0..5000 {
            let mut bytes = valid.clone();
            for _ in 0..=rng.below(4) {
                let at = rng.below(bytes.len() as u64) as usize;
                bytes[at] = rng.next_u64() as u8;
            }
            bytes.truncate(rng.below(bytes.len() as u64 + 1) as usize);
            let _ = Sample::from_bytes(&bytes);
        }
    }
}
