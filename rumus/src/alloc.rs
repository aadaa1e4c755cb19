//! Memory for results whose size comes from user input: a request the allocator cannot meet
//! is an [`Error::OutOfMemory`], not a process abort.
//!
//! Rust's `Vec` aborts the process when the allocator refuses, and a shape read from a file
//! or computed from arguments (an `arange` of 10^12 values, a matrix product of two empty
//! operands with a [2^20, 2^20] result, a convolution padded by 2^20) can ask for terabytes.
//! Two tools close that gap:
//!
//! - [`try_with_capacity`] reserves a vector fallibly, for code that builds its own buffer
//!   (constructors, file readers);
//! - [`ensure_output`] is called by ops before their kernels run, with the dims of the
//!   output (or scratch) they are about to allocate. The kernels keep their plain `Vec`s (and
//!   the buffer pool) on the hot path; for large requests the check first asks the allocator
//!   for the same number of bytes and gives them back at once. An untouched reservation costs
//!   one `mmap`/`munmap` pair, nothing next to filling that much memory. A request that passes
//!   and then fails because another thread took the memory in between still aborts, as any
//!   allocation in any Rust program does.
//!
//! Work on untrusted input (an ONNX graph) can also set a [`Ceiling`] for its thread with
//! [`with_ceiling`]: every request checked above, small ones included, is then refused past
//! it, so a graph cannot take memory the machine could give but the graph has no business
//! asking for.

use std::cell::Cell;

use crate::error::{Error, Result};

/// The most one request may ask for while a ceiling is set, and the settings a user changes
/// to raise it (named in the refusal).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ceiling {
    pub elements: usize,
    pub bytes: usize,
    /// The setting `elements` comes from, e.g. `rumus::onnx::Limits::max_elements`.
    pub elements_setting: &'static str,
    /// The setting `bytes` comes from.
    pub bytes_setting: &'static str,
}

thread_local! {
    static CEILING: Cell<Option<Ceiling>> = const { Cell::new(None) };
}

/// Runs `f` with `ceiling` on every request checked on this thread, then puts back the
/// ceiling that was there before (also when `f` panics).
// Set by the ONNX importer only (the `onnx` feature).
#[cfg_attr(not(feature = "onnx"), allow(dead_code))]
pub(crate) fn with_ceiling<R>(ceiling: Ceiling, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Ceiling>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CEILING.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CEILING.with(|c| c.replace(Some(ceiling))));
    f()
}

/// Fails when the ceiling set on this thread, if any, is below `count` elements or `bytes`.
fn within_ceiling(op: &str, what: &dyn Fn() -> String, count: usize, bytes: usize) -> Result<()> {
    let Some(ceiling) = CEILING.with(Cell::get) else {
        return Ok(());
    };
    let over = |amount: usize, unit: &str, limit: usize, setting: &str| Error::OutOfMemory {
        op: op.to_string(),
        message: format!(
            "{} needs {amount} {unit}, over the limit of {limit} {unit} per allocation \
             ({setting}); raise it if the input is trusted",
            what()
        ),
    };
    if count > ceiling.elements {
        return Err(over(
            count,
            "elements",
            ceiling.elements,
            ceiling.elements_setting,
        ));
    }
    if bytes > ceiling.bytes {
        return Err(over(bytes, "bytes", ceiling.bytes, ceiling.bytes_setting));
    }
    Ok(())
}

/// Requests below this are left to the allocator: they cannot be absurd, and the check would
/// cost more than it protects on the small ops that dominate a training step.
const CHECKED_FROM_BYTES: usize = 64 << 20;

/// The bytes of `count` values of `element_bytes` each, or the error that they overflow.
fn bytes_of(op: &str, what: &str, count: usize, element_bytes: usize) -> Result<usize> {
    count
        .checked_mul(element_bytes)
        .filter(|&bytes| bytes <= isize::MAX as usize)
        .ok_or_else(|| Error::OutOfMemory {
            op: op.to_string(),
            message: format!(
                "{what} of {count} elements of {element_bytes} bytes needs more bytes than \
                 an address space holds"
            ),
        })
}

fn refused(op: &str, what: &str, bytes: usize) -> Error {
    Error::OutOfMemory {
        op: op.to_string(),
        message: format!(
            "{what} needs {bytes} bytes ({:.1} GiB), more memory than can be allocated",
            bytes as f64 / (1u64 << 30) as f64
        ),
    }
}

/// Fails when `count` values of `element_bytes` bytes cannot be allocated. `op` and `what`
/// ("the result [2, 3]", "the im2col columns") name the request in the error; `what` is
/// built only for an error, so the check costs a multiplication on the small ops of a
/// training step.
fn ensure_allocatable(
    op: &str,
    what: impl Fn() -> String,
    count: usize,
    element_bytes: usize,
) -> Result<()> {
    let bytes = match count.checked_mul(element_bytes) {
        Some(bytes) if bytes <= isize::MAX as usize => bytes,
        _ => return bytes_of(op, &what(), count, element_bytes).map(|_| ()),
    };
    within_ceiling(op, &what, count, bytes)?;
    if bytes < CHECKED_FROM_BYTES {
        return Ok(());
    }
    let what = what();
    let mut probe: Vec<u8> = Vec::new();
    probe
        .try_reserve_exact(bytes)
        .map_err(|_| refused(op, &what, bytes))
}

/// Fails when a result of `dims` with elements of `element_bytes` cannot be allocated; ops
/// call it before their kernels run.
#[inline]
pub fn ensure_output(op: &str, dims: &[usize], element_bytes: usize) -> Result<()> {
    // Every op checks its result here, most of them small: a saturating product (exact
    // unless it overflows, and 0 when any size is) settles those without the full check.
    let count = dims.iter().fold(1usize, |n, &d| n.saturating_mul(d));
    if count < CHECKED_FROM_BYTES / 8 && element_bytes <= 8 && CEILING.with(|c| c.get().is_none()) {
        return Ok(());
    }
    ensure_output_checked(op, dims, element_bytes)
}

/// [`ensure_output`] for results that are large or checked against a ceiling.
#[cold]
fn ensure_output_checked(op: &str, dims: &[usize], element_bytes: usize) -> Result<()> {
    let count = crate::shape::checked_numel(dims, op)?;
    ensure_allocatable(op, || format!("the result {dims:?}"), count, element_bytes)
}

/// An empty vector with room for `count` values, or the error that the memory cannot be had.
pub fn try_with_capacity<T>(op: &str, what: &str, count: usize) -> Result<Vec<T>> {
    let bytes = bytes_of(op, what, count, std::mem::size_of::<T>())?;
    within_ceiling(op, &|| what.to_string(), count, bytes)?;
    let mut out = Vec::new();
    out.try_reserve_exact(count)
        .map_err(|_| refused(op, what, bytes))?;
    Ok(out)
}

/// `values` mapped through `f` into a vector reserved fallibly.
pub fn try_map<A, B>(op: &str, what: &str, values: &[A], f: impl Fn(&A) -> B) -> Result<Vec<B>> {
    let mut out = try_with_capacity(op, what, values.len())?;
    out.extend(values.iter().map(f));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_requests_are_errors_and_small_ones_pass() {
        let overflow = ensure_output("t", &[usize::MAX / 2, 2], 4).unwrap_err();
        assert!(overflow.to_string().contains("address space"), "{overflow}");
        // 2^45 bytes (32 TiB): more than any machine this runs on can map.
        let huge = ensure_output("t", &[1 << 43], 4).unwrap_err();
        assert!(huge.to_string().contains("more memory than"), "{huge}");
        assert!(
            huge.to_string().contains("the result [8796093022208]"),
            "{huge}"
        );
        assert!(ensure_output("t", &[1 << 20], 4).is_ok());
        assert!(try_with_capacity::<u64>("t", "labels", 1 << 57).is_err());
        assert_eq!(try_map("t", "x", &[1u8, 2], |&b| b as i64).unwrap(), [1, 2]);
    }

    #[test]
    fn a_ceiling_refuses_small_requests_past_it_until_it_is_lifted() {
        let ceiling = Ceiling {
            elements: 100,
            bytes: 256,
            elements_setting: "max_elements",
            bytes_setting: "max_bytes",
        };
        with_ceiling(ceiling, || {
            let elements = ensure_output("t", &[101], 1).unwrap_err().to_string();
            assert!(elements.contains("101 elements") && elements.contains("max_elements"));
            let bytes = try_with_capacity::<u64>("t", "x", 33)
                .unwrap_err()
                .to_string();
            assert!(
                bytes.contains("264 bytes") && bytes.contains("max_bytes"),
                "{bytes}"
            );
            assert!(ensure_output("t", &[64], 4).is_ok());
        });
        assert!(ensure_output("t", &[101], 8).is_ok());
    }
}
