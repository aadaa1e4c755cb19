//! The library builds in the configurations users pick: CPU only with no optional feature,
//! and with the default features (no `gpu`). The rest of the suite builds rumus with `gpu`
//! and `plot` on, so a `#[cfg(feature = "gpu")]` missing on a GPU-only call would otherwise
//! go unnoticed until a CPU-only user's build failed.

use std::path::Path;
use std::process::Command;

fn check_builds(features: &[&str]) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // A target directory of its own, so this check neither waits on nor invalidates the
    // builds of the test run around it.
    let target = root.join("target").join("feature-builds");
    let output = Command::new(env!("CARGO"))
        .args(["check", "--offline", "--quiet", "-p", "rumus", "--lib"])
        .args(features)
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(root)
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "`cargo check -p rumus {}` failed:\n{}",
        features.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_library_builds_without_gpu_support() {
    check_builds(&["--no-default-features"]);
    check_builds(&[]);
}
