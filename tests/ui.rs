//! Compile-time shape checking, driven by trybuild: `ui-tests/pass` must compile (and run),
//! every case under `ui-tests/fail` must fail with exactly its reviewed `.stderr`.
//! Regenerate expectations after a deliberate change with `TRYBUILD=overwrite cargo test --test ui`
//! and review the diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui-tests/pass/*.rs");
    cases.compile_fail("ui-tests/fail/*/*.rs");
}
