//! Compile-time shape checking, driven by trybuild: `ui-tests/pass` must compile (and run),
//! every case under `ui-tests/fail` (errors of the shape-checking macros, by topic) must fail
//! with exactly its reviewed `.stderr`. `ui-tests/typed` holds the errors of the plain typed
//! API and the residual checks the macros leave to the type system (nested models through the
//! `Forward` trait); they come from rustc and therefore print dims as types (`D<784>`).
//! Regenerate expectations after a deliberate change with `TRYBUILD=overwrite cargo test --test ui`
//! and review the diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui-tests/pass/*.rs");
    cases.compile_fail("ui-tests/fail/*/*.rs");
    cases.compile_fail("ui-tests/typed/*.rs");
}
