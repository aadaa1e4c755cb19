//! The note a test prints when what it checks is missing here (a GPU, a data set, a model
//! file), or its failure where CI requires it.

/// Notes on stderr that the running test leaves `what` unchecked because `why`; or, where the
/// environment variable `require` is set (by a run on hardware that has what the check
/// needs), fails the test instead. A check that cannot run never passes in silence.
pub fn skip(require: &str, what: &str, why: impl std::fmt::Display) {
    // libtest runs each test on a thread named after it.
    let current = std::thread::current();
    let test = current.name().unwrap_or("a test");
    if std::env::var_os(require).is_some() {
        panic!("{test}: {require} is set, but {what} cannot be checked: {why}");
    }
    // Straight to the process's stderr: libtest captures `eprintln!` of passing tests.
    let note = format!("skipped in {test}: {what}: {why} (set {require}=1 to fail instead)\n");
    let _ = std::io::Write::write_all(&mut std::io::stderr(), note.as_bytes());
}
