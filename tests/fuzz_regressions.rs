//! Replays the fuzzers' inputs without a fuzzer, through the same drivers the fuzz targets
//! call (`rumus/fuzz/drive/`): every seed under `rumus/fuzz/seeds/<target>/` is a valid
//! input and must be accepted; every input a fuzzer once flagged
//! (`rumus/fuzz/regressions/<target>/`) must give `Ok` or `Err`, never a panic or an absurd
//! allocation.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[path = "../rumus/fuzz/drive/mod.rs"]
mod drive;
#[path = "../rumus/fuzz/seeds/generate.rs"]
mod generate;

/// Seeds that start a fuzzer well but are not valid inputs of their target, and what the
/// refusal says.
const REFUSED_SEEDS: &[(&str, &str, &str)] = &[
    (
        "checkpoint_loader",
        "weights.safetensors",
        "not a rumus checkpoint",
    ),
    // Hostile models (`tests/hostile_onnx.rs`): each refused by the limit it breaks.
    (
        "onnx_import",
        "hostile_cumsum_reversed_of_expanded.onnx",
        "Limits::max_elements",
    ),
    (
        "onnx_import",
        "hostile_matmul_of_expanded.onnx",
        "Limits::max_elements",
    ),
    (
        "onnx_import",
        "hostile_opset_huge.onnx",
        "rumus runs opsets 13 to 22",
    ),
    (
        "onnx_import",
        "hostile_resize_of_empty_to_huge.onnx",
        "Limits::max_elements",
    ),
    (
        "onnx_import",
        "hostile_slice_by_two_of_expanded.onnx",
        "Limits::max_elements",
    ),
    (
        "onnx_import",
        "hostile_unsqueeze_many.onnx",
        "Limits::max_rank",
    ),
    ("onnx_import", "hostile_unsqueeze_twice.onnx", "twice"),
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("rumus/fuzz")
}

fn files(kind: &str, target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let Ok(entries) = std::fs::read_dir(fuzz_dir().join(kind).join(target)) else {
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

/// The folders under `kind` (one per target).
fn folders(kind: &str) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(fuzz_dir().join(kind)) else {
        return BTreeSet::new();
    };
    entries
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn every_fuzz_target_has_a_driver_and_seeds() {
    let manifest = std::fs::read_to_string(fuzz_dir().join("Cargo.toml")).unwrap();
    let targets: BTreeSet<String> = manifest
        .split("[[bin]]")
        .skip(1)
        .filter_map(|bin| {
            let line = bin.lines().find(|l| l.trim_start().starts_with("name"))?;
            Some(line.split('"').nth(1)?.to_string())
        })
        .collect();
    let drivers: BTreeSet<String> = drive::TARGETS.iter().map(|(t, _)| t.to_string()).collect();
    assert_eq!(
        targets, drivers,
        "fuzz/Cargo.toml's targets and drive::TARGETS"
    );
    assert_eq!(folders("seeds"), drivers, "the folders under fuzz/seeds/");
    let unknown: Vec<_> = folders("regressions")
        .difference(&drivers)
        .cloned()
        .collect();
    assert!(
        unknown.is_empty(),
        "regressions of unknown targets: {unknown:?}"
    );
}

#[test]
fn seeds_are_valid_inputs() {
    for &(target, run) in drive::TARGETS {
        let seeds = files("seeds", target);
        assert!(!seeds.is_empty(), "no seeds for {target}");
        for (path, bytes) in seeds {
            let name = path.file_name().unwrap().to_string_lossy();
            let refused = REFUSED_SEEDS
                .iter()
                .find(|(t, n, _)| *t == target && *n == name);
            match (run(&bytes), refused) {
                (Ok(()), None) => {}
                (Err(e), Some((.., expected))) if e.to_string().contains(expected) => {}
                (result, _) => panic!("{target} seed {}: {result:?}", path.display()),
            }
        }
    }
}

#[test]
fn flagged_inputs_give_results_not_panics() {
    for &(target, run) in drive::TARGETS {
        for (path, bytes) in files("regressions", target) {
            let result = run(&bytes);
            eprintln!("{target} {}: {result:?}", path.display());
        }
    }
}

/// The structure-aware targets recompute checksums exactly as rumus's writers do: a seed
/// with a changed byte is refused as corrupt, and accepted once the checksums are redone.
#[test]
fn checksum_fixers_match_the_writers() {
    for (path, mut bytes) in files("seeds", "checkpoint_structure") {
        *bytes.last_mut().unwrap() ^= 0x40; // a value of the last tensor
        let refused = drive::checkpoint::load(&bytes).unwrap_err().to_string();
        assert!(refused.contains("checksum mismatch"), "{refused}");
        drive::checkpoint::structured(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
    let (_, mut bytes) = files("seeds", "record_file_open")
        .into_iter()
        .find(|(p, _)| p.ends_with("three.rrec"))
        .unwrap();
    bytes[12 + 12 + 1 + 4 + 2 * 4] ^= 0x40; // the first input value of record 0
    let refused = drive::records::from_bytes(&bytes).unwrap_err().to_string();
    assert!(refused.contains("checksum mismatch"), "{refused}");
    drive::records::open(&bytes).unwrap();
}

#[test]
#[ignore = "rewrites rumus/fuzz/seeds/; run after a change of a file format"]
fn write_seeds() {
    generate::write_all(&fuzz_dir().join("seeds"));
}
