//! Record files: records of any size round-trip and are read in any order; samples stored as
//! records come back through a dataset; a corrupted or truncated file is an error naming what
//! is wrong, never a panic and never different bytes; and a writer replaces its destination
//! only when it finishes.

mod common;

use common::scratch::Scratch;
use std::path::Path;

use rumus::data::{
    DataLoader, Dataset, Features, RecordDataset, RecordFile, RecordWriter, Sample, Target,
};
use rumus::rng::Generator;

/// Payload `i`: a length that varies a lot (often empty), and bytes that depend on `i`.
fn payload(i: usize) -> Vec<u8> {
    let len = match i % 7 {
        0 => 0,
        1 => 1,
        2 => 4096 + i,
        _ => (i * 37) % 300,
    };
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

fn write(path: &Path, payloads: &[Vec<u8>]) {
    let mut writer = RecordWriter::create(path).unwrap();
    for (i, p) in payloads.iter().enumerate() {
        assert_eq!(writer.append(p).unwrap(), i as u64);
    }
    assert_eq!(writer.len(), payloads.len());
    writer.finish().unwrap();
}

/// The bytes of a small finished file.
fn small_file(scratch: &Scratch, payloads: &[Vec<u8>]) -> Vec<u8> {
    let path = scratch.join("small.rrec");
    write(&path, payloads);
    std::fs::read(&path).unwrap()
}

fn small_payloads() -> Vec<Vec<u8>> {
    vec![b"first".to_vec(), Vec::new(), vec![0xAB; 9], b"z".to_vec()]
}

#[test]
fn many_records_of_varied_sizes_round_trip() {
    let scratch = Scratch::new("record-files-round-trip");
    let path = scratch.join("many.rrec");
    let payloads: Vec<Vec<u8>> = (0..3000).map(payload).collect();
    write(&path, &payloads);
    let file = RecordFile::open(&path).unwrap();
    assert_eq!(file.len(), payloads.len());
    for (i, (got, expected)) in file.iter().zip(&payloads).enumerate() {
        assert_eq!(got.unwrap(), expected.as_slice(), "record {i}");
    }
    assert!(file.get(3000).is_err());
    // SAFETY: nothing modifies the file while this test maps it.
    let mapped = unsafe { RecordFile::open_mapped(&path) }.unwrap();
    assert_eq!(mapped.len(), payloads.len());
    for (i, (got, expected)) in mapped.iter().zip(&payloads).enumerate() {
        assert_eq!(got.unwrap(), expected.as_slice(), "mapped record {i}");
    }

    let empty = scratch.join("empty.rrec");
    write(&empty, &[]);
    assert!(RecordFile::open(&empty).unwrap().is_empty());
}

#[test]
fn records_are_read_in_any_order() {
    let scratch = Scratch::new("record-files-random-access");
    let path = scratch.join("shuffled.rrec");
    let payloads: Vec<Vec<u8>> = (0..1000).map(payload).collect();
    write(&path, &payloads);
    let file = RecordFile::open(&path).unwrap();
    let mut rng = Generator::new(3);
    for &i in rng
        .permutation(payloads.len())
        .iter()
        .chain([999, 0, 999, 500].iter())
    {
        assert_eq!(file.get(i).unwrap(), payloads[i].as_slice(), "record {i}");
    }
}

#[test]
fn samples_round_trip_through_a_record_dataset() {
    let scratch = Scratch::new("record-files-samples");
    let path = scratch.join("samples.rrec");
    let samples: Vec<Sample> = (0..50)
        .map(|i| {
            let input = Features::new(
                (0..12).map(|j| (i * 12 + j) as f32 / 7.0).collect(),
                &[1, 3, 4],
            )
            .unwrap();
            if i % 3 == 0 {
                Sample {
                    input,
                    target: Target::Values(Features::vector(vec![i as f32, -1.5])),
                }
            } else {
                Sample::classified(input, i as i64 % 10)
            }
        })
        .collect();
    let mut writer = RecordWriter::create(&path).unwrap();
    for sample in &samples {
        writer.append(&sample.try_to_bytes().unwrap()).unwrap();
    }
    writer.finish().unwrap();

    let dataset = RecordDataset::open(&path)
        .unwrap()
        .decode(Sample::from_bytes);
    assert_eq!(dataset.len(), samples.len());
    for i in [49, 0, 17, 3, 48] {
        assert_eq!(dataset.get(i).unwrap(), samples[i]);
    }
    let err = dataset.get(50).unwrap_err();
    assert!(
        matches!(
            err,
            rumus::Error::IndexOutOfRange {
                index: 50,
                size: 50,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_sample_that_does_not_decode_is_named_by_file_and_record() {
    let scratch = Scratch::new("record-files-bad-sample");
    let path = scratch.join("data.rrec");
    let samples: Vec<Sample> = (0..20)
        .map(|i| Sample::classified(Features::vector(vec![i as f32; 6]), i))
        .collect();
    // Intact records (their checksums hold) whose payloads are not samples: record 17 is
    // cut short, record 5 has an unknown encoding version.
    let mut writer = RecordWriter::create(&path).unwrap();
    for (i, sample) in samples.iter().enumerate() {
        let mut bytes = sample.try_to_bytes().unwrap();
        match i {
            17 => bytes.truncate(bytes.len() - 3),
            5 => bytes[0] = 9,
            _ => {}
        }
        writer.append(&bytes).unwrap();
    }
    writer.finish().unwrap();

    let dataset = RecordDataset::open(&path)
        .unwrap()
        .decode(Sample::from_bytes);
    assert_eq!(dataset.get(16).unwrap(), samples[16]);
    let file = path.display();
    let err = dataset.get(17).unwrap_err();
    assert!(matches!(err, rumus::Error::Format { .. }), "{err:?}");
    let err = err.to_string();
    assert!(
        err.starts_with(&format!(
            "{file}: record 17: truncated: the class needs 8 bytes"
        )),
        "{err}"
    );
    let err = dataset.get(5).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "{file}: record 5: unsupported sample encoding version 9"
        )),
        "{err}"
    );

    // What a training loop sees: the batch holding record 17 fails, naming it.
    let mut loader = DataLoader::new(dataset, 4).unwrap();
    let errors: Vec<String> = loader
        .epoch()
        .filter_map(|batch| batch.err().map(|e| e.to_string()))
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with(&format!("{file}: record 5: ")),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with(&format!("{file}: record 17: ")),
        "{errors:?}"
    );

    // The same through the file alone.
    let records = RecordFile::open(&path).unwrap();
    let err = records
        .decode(17, Sample::from_bytes)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with(&format!("{file}: record 17: truncated")),
        "{err}"
    );
    assert_eq!(records.decode(3, Sample::from_bytes).unwrap(), samples[3]);
}

#[test]
fn every_single_byte_corruption_is_detected() {
    let scratch = Scratch::new("record-files-corruption");
    let payloads = small_payloads();
    let bytes = small_file(&scratch, &payloads);
    let mut detected = 0;
    for position in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xFF] {
            let mut corrupt = bytes.clone();
            corrupt[position] ^= mask;
            let Ok(file) = RecordFile::from_bytes(corrupt, "corrupt.rrec") else {
                detected += 1;
                continue;
            };
            assert_eq!(file.len(), payloads.len(), "byte {position} ^ {mask:#x}");
            let mut errors = 0;
            for (i, expected) in payloads.iter().enumerate() {
                match file.get(i) {
                    Ok(got) => assert_eq!(
                        got,
                        expected.as_slice(),
                        "byte {position} ^ {mask:#x}: record {i} came back different"
                    ),
                    Err(e) => {
                        errors += 1;
                        assert!(
                            e.to_string().contains(&format!("record {i}:")),
                            "byte {position} ^ {mask:#x}: {e}"
                        );
                    }
                }
            }
            assert!(errors > 0, "byte {position} ^ {mask:#x} went unnoticed");
            detected += 1;
        }
    }
    assert_eq!(detected, bytes.len() * 3);
}

#[test]
fn every_truncation_is_an_error_about_truncation() {
    let scratch = Scratch::new("record-files-truncation");
    let bytes = small_file(&scratch, &small_payloads());
    for len in 0..bytes.len() {
        let err = RecordFile::from_bytes(&bytes[..len], "cut.rrec")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("cut.rrec: ") && (err.contains("truncated") || err.contains("footer")),
            "{len} bytes: {err}"
        );
    }
    // The same through the file system (a zero-length file is not mapped).
    let path = scratch.join("cut.rrec");
    for len in [0, 5, 12, 30, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..len]).unwrap();
        let err = RecordFile::open(&path).unwrap_err().to_string();
        assert!(err.contains("truncated"), "{len} bytes: {err}");
    }
}

/// The names of the files in `dir`.
fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_writer_replaces_the_file_only_when_it_finishes() {
    let scratch = Scratch::new("record-files-replace");
    let path = scratch.join("data.rrec");
    let old = small_payloads();
    write(&path, &old);
    let old_bytes = std::fs::read(&path).unwrap();
    // A reader of the old file stays open throughout.
    let reader = RecordFile::open(&path).unwrap();

    for records in [0, 3] {
        let mut writer = RecordWriter::create(&path).unwrap();
        for i in 0..records {
            writer.append(&payload(i)).unwrap();
        }
        assert_eq!(std::fs::read(&path).unwrap(), old_bytes, "while writing");
        drop(writer);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            old_bytes,
            "after an unfinished writer"
        );
        assert_eq!(
            file_names(scratch.dir()),
            ["data.rrec"],
            "no temporary file stays"
        );
    }

    let new: Vec<Vec<u8>> = (0..50).map(payload).collect();
    write(&path, &new);
    let file = RecordFile::open(&path).unwrap();
    assert_eq!(file.len(), new.len());
    for (i, expected) in new.iter().enumerate() {
        assert_eq!(file.get(i).unwrap(), expected.as_slice(), "new record {i}");
    }
    // The reader that was open keeps the old records: the new file is a new file.
    assert_eq!(reader.len(), old.len());
    for (i, expected) in old.iter().enumerate() {
        assert_eq!(
            reader.get(i).unwrap(),
            expected.as_slice(),
            "old record {i}"
        );
    }
    assert_eq!(file_names(scratch.dir()), ["data.rrec"]);

    // An unfinished writer of a new path leaves nothing there.
    let fresh = scratch.join("fresh.rrec");
    let mut writer = RecordWriter::create(&fresh).unwrap();
    writer.append(b"never finished").unwrap();
    drop(writer);
    assert!(!fresh.exists());
    let err = RecordFile::open(&fresh).unwrap_err();
    assert!(matches!(err, rumus::Error::Io { .. }), "{err}");
}

#[test]
fn a_corrupted_record_is_named_by_its_index() {
    let scratch = Scratch::new("record-files-named-record");
    let path = scratch.join("data.rrec");
    let payloads: Vec<Vec<u8>> = (0..40).map(|i| vec![i as u8; 10 + i]).collect();
    write(&path, &payloads);
    // Record 17's payload starts after the header (12 bytes) and 17 frames (12 bytes each).
    let at = 12 + (0..17).map(|i| 12 + payloads[i].len()).sum::<usize>() + 12 + 3;
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[at] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();

    let file = RecordFile::open(&path).unwrap();
    assert_eq!(file.get(16).unwrap(), payloads[16].as_slice());
    assert_eq!(file.get(18).unwrap(), payloads[18].as_slice());
    let err = file.get(17).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "{}: record 17: checksum mismatch (stored 0x",
            path.display()
        )),
        "{err}"
    );
    assert!(err.contains("the file is corrupted"), "{err}");

    let dataset = RecordDataset::new(file);
    let err = dataset.get(17).unwrap_err().to_string();
    assert!(err.contains("record 17"), "{err}");
}

#[test]
fn wrong_magic_and_missing_files_are_clear_errors() {
    let scratch = Scratch::new("record-files-wrong-magic");
    let path = scratch.join("model.safetensors");
    std::fs::write(&path, vec![b'{'; 100]).unwrap();
    let err = RecordFile::open(&path).unwrap_err().to_string();
    assert!(err.contains("not a record file"), "{err}");
    let missing = scratch.join("missing.rrec");
    let err = RecordFile::open(&missing).unwrap_err();
    assert!(matches!(err, rumus::Error::Io { .. }), "{err}");
}

/// Set, with a directory, in the child process of
/// `a_file_truncated_while_open_is_an_error_not_a_crash`.
const TRUNCATING_CHILD: &str = "RUMUS_TEST_RECORD_TRUNCATED_WHILE_OPEN";

/// Another process truncating a record file that a reader has open (a dataset regenerated in
/// place while training reads it) makes the records it took away errors that say what
/// happened. A memory-mapped reader died of `SIGBUS` here, taking every other test of the
/// binary with it, so the reading runs in a child process whose death fails this test alone.
#[test]
fn a_file_truncated_while_open_is_an_error_not_a_crash() {
    if let Some(dir) = std::env::var_os(TRUNCATING_CHILD) {
        read_a_file_truncated_while_open(Path::new(&dir));
        return;
    }
    let scratch = Scratch::new("record-files-truncated-while-open");
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_file_truncated_while_open_is_an_error_not_a_crash",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(TRUNCATING_CHILD, scratch.dir())
        .output()
        .unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "the reader of a truncated file did not finish ({}): {printed}",
        output.status
    );
    // The child ran the reads, not an empty filter.
    assert!(printed.contains("1 passed"), "{printed}");
}

/// The child's part: writes a file, opens it, truncates it through another handle and
/// reads it.
fn read_a_file_truncated_while_open(dir: &Path) {
    let path = dir.join("rewritten.rrec");
    let payloads: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 5000]).collect();
    write(&path, &payloads);
    let full = std::fs::metadata(&path).unwrap().len();
    let file = RecordFile::open(&path).unwrap();
    let dataset = RecordDataset::open(&path).unwrap();
    assert_eq!(file.get(40).unwrap(), payloads[40].as_slice());

    // The second half of the records and the index are gone: records 0 to 31 (12 + 32 x
    // 5,012 bytes) remain whole.
    let kept = full / 2;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(kept)
        .unwrap();
    for index in [0, 10, 31] {
        assert_eq!(file.get(index).unwrap(), payloads[index].as_slice());
        assert_eq!(dataset.get(index).unwrap(), payloads[index]);
    }
    let expected = format!("the file shrank from {full} to {kept} bytes while open");
    for index in [32, 40, 63] {
        let message = match file.get(index) {
            Ok(payload) => panic!("record {index} read {} bytes", payload.len()),
            Err(e) => e.to_string(),
        };
        assert!(
            message.starts_with(&format!("{}: record {index}: ", path.display()))
                && message.contains(&expected),
            "{message}"
        );
        let message = match dataset.get(index) {
            Ok(payload) => panic!("record {index} read {} bytes", payload.len()),
            Err(e) => e.to_string(),
        };
        assert!(message.contains(&expected), "{message}");
    }
}
