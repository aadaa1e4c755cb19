//! Compile-time shape checking, driven by trybuild: `pass/` must compile (and run);
//! `hint_applied/` holds, under the same names as cases of `fail/`, each case with its
//! `help:` followed, which must compile and run too;
//! every case under `fail/` (errors of the shape-checking macros, by topic) must fail
//! with exactly its reviewed `.stderr`. `typed/` holds the errors of the plain typed
//! API and the residual checks the macros leave to the type system (nested models through the
//! `Forward` trait); they come from rustc and therefore print dims as types (`D<784>`).
//! Regenerate expectations after a deliberate change with `TRYBUILD=overwrite cargo test -p rumus-ui-tests`
//! and review the diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("pass/*.rs");
    cases.pass("hint_applied/*.rs");
    cases.compile_fail("fail/*/*.rs");
    cases.compile_fail("typed/*.rs");
}
