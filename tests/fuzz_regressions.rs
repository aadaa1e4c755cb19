//! Replays the fuzzers' inputs without a fuzzer: every seed under `rumus/fuzz/seeds/` is a
//! valid file and must load; every input a fuzzer once flagged (`rumus/fuzz/regressions/`)
//! must give `Ok` or `Err`, never a panic or an absurd allocation.

use std::path::{Path, PathBuf};

use rumus::data::{RecordFile, Sample, decode_idx};
use rumus::io::Checkpoint;

fn files(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("rumus/fuzz")
        .join(kind)
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut out: Vec<(PathBuf, Vec<u8>)> = entries
        .map(|e| {
            let path = e.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            (path, bytes)
        })
        .collect();
    out.sort();
    out
}

/// Reads `bytes` the way the `record_reader` target does; `Err` on the first failure.
fn read_records(bytes: &[u8]) -> rumus::Result<Vec<Sample>> {
    let file = RecordFile::from_bytes(bytes.to_vec(), "replay.rrec")?;
    (0..file.len())
        .map(|i| Sample::from_bytes(file.get(i)?))
        .collect()
}

#[test]
fn seeds_are_valid_files() {
    let idx = files("seeds", "idx_reader");
    assert!(!idx.is_empty(), "the IDX seeds are missing");
    for (path, bytes) in idx {
        let array = decode_idx(&bytes, &path).unwrap();
        assert_eq!(array.data.len(), array.dims.iter().product::<usize>());
    }
    let records = files("seeds", "record_reader");
    assert!(!records.is_empty(), "the record seeds are missing");
    for (path, bytes) in records {
        let samples = read_records(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!samples.is_empty());
    }
    let checkpoints = files("seeds", "checkpoint_loader");
    assert!(!checkpoints.is_empty(), "the checkpoint seeds are missing");
    for (path, bytes) in checkpoints {
        let loaded = Checkpoint::from_bytes(&bytes, &path.display().to_string());
        // The seeds hold a checkpoint and a plain weights file, which is not one.
        if path.to_string_lossy().contains("weights") {
            let message = loaded.unwrap_err().to_string();
            assert!(message.contains("not a rumus checkpoint"), "{message}");
        } else {
            assert!(!loaded.unwrap().model.is_empty());
        }
    }
}

#[test]
fn flagged_inputs_give_results_not_panics() {
    for (path, bytes) in files("regressions", "idx_reader") {
        if let Ok(array) = decode_idx(&bytes, &path) {
            let count = array.dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
            assert_eq!(count, Some(array.data.len()), "{}", path.display());
        }
    }
    for (_, bytes) in files("regressions", "record_reader") {
        let _ = read_records(&bytes);
    }
    for (path, bytes) in files("regressions", "checkpoint_loader") {
        let _ = Checkpoint::from_bytes(&bytes, &path.display().to_string());
    }
}
