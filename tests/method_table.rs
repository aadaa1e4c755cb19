//! The method table of rumus-macros is the one list of tensor methods `tensor_fn!` knows.
//! Generated from it: one test per typed `Tensor` method that calls it through `tensor_fn!`
//! and through the typed API and compares the results (type, dims, values). Written here:
//! the drift check, which reads the typed `impl Tensor` blocks of rumus's sources and names
//! every public method that is neither in the table nor listed below as not a tensor op.

use std::path::Path;

rumus::__private::method_cases!();

/// Public methods of the typed `Tensor` that are not tensor ops, so `tensor_fn!` has no
/// reason to know them. Their `try_` forms are covered by the same entry.
const NOT_TENSOR_FN_METHODS: &[&str] = &[
    // Constructors: a `tensor_fn!` receives its tensors as parameters.
    "from_vec",
    "from_vec_with_dims",
    "zeros_with_dims",
    "randn_with_dims",
    "full",
    "zeros",
    "ones",
    "randn",
    "uniform",
    // The boundary to untyped and runtime-shaped code, which the parameters already are.
    "erase",
    "as_dyn",
    "try_shape",
    // Reading a tensor out: values, sizes, metadata, not tensors.
    "dims",
    "dtype",
    "device",
    "requires_grad",
    "to_vec",
    "value",
    // Training and placement, decided outside a forward pass.
    "requires_grad_",
    "register_hook",
    "backward",
    "to",
    // A change of element type: `tensor_fn!` values past the parameters are `f32`.
    "to_dtype",
];

/// The `pub fn` names of every inherent `impl ... Tensor<...>` block in `source`.
fn typed_methods(source: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut depth = 0usize;
    let mut in_tensor_impl = false;
    for line in source.lines() {
        let code = line.trim();
        if code.starts_with("//") {
            continue;
        }
        if depth == 0 && code.starts_with("impl") {
            in_tensor_impl = is_tensor_impl(code);
        }
        if in_tensor_impl
            && depth == 1
            && let Some(rest) = code.strip_prefix("pub fn ")
        {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            names.push(name);
        }
        for c in code.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
    }
    names
}

/// Whether an `impl` header is an inherent impl of the typed `Tensor` (not a trait impl).
fn is_tensor_impl(header: &str) -> bool {
    let mut rest = header.trim_start_matches("impl");
    if rest.starts_with('<') {
        let mut open = 0;
        let end = rest.char_indices().find_map(|(i, c)| {
            match c {
                '<' => open += 1,
                '>' => open -= 1,
                _ => {}
            }
            (open == 0).then_some(i + 1)
        });
        rest = &rest[end.unwrap_or(rest.len())..];
    }
    let rest = rest.trim_start();
    let rest = rest.strip_prefix("crate::tensor::typed::").unwrap_or(rest);
    let rest = rest.strip_prefix("crate::").unwrap_or(rest);
    rest.starts_with("Tensor<") && !rest.contains(" for ")
}

fn rust_files(dir: &Path, files: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

/// `name` is a table method, an excluded method, or the `try_` form of one.
fn covered(name: &str) -> bool {
    let known = |n: &str| TABLE_METHODS.contains(&n) || NOT_TENSOR_FN_METHODS.contains(&n);
    known(name) || name.strip_prefix("try_").is_some_and(known)
}

#[test]
fn every_typed_tensor_method_is_in_the_method_table() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("rumus/src"),
        &mut files,
    );
    let mut found = Vec::new();
    for file in &files {
        for name in typed_methods(&std::fs::read_to_string(file).unwrap()) {
            if !covered(&name) {
                panic!(
                    "`Tensor::{name}` ({}) is neither in the method table (rumus-macros/src/methods/mod.rs) nor in NOT_TENSOR_FN_METHODS; add it to the table so tensor_fn! knows it, or list it with the reason it is not a tensor op",
                    file.display()
                );
            }
            found.push(name);
        }
    }
    // The scan must see the methods written out by hand, or it proves nothing.
    for expected in [
        "matmul", "t", "bmm", "linear", "reshape", "detach", "from_vec",
    ] {
        assert!(
            found.iter().any(|n| n == expected),
            "the scan of rumus/src missed `Tensor::{expected}`; it found {found:?}"
        );
    }
}

#[test]
fn the_scan_reads_impl_headers() {
    assert!(is_tensor_impl("impl<S: Shape, E: Float> Tensor<S, E> {"));
    assert!(is_tensor_impl("impl<E: Element> Tensor<(), E> {"));
    assert!(!is_tensor_impl(
        "impl<S: Shape, E: Float> ops::Neg for &Tensor<S, E> {"
    ));
    assert!(!is_tensor_impl("impl DynTensor {"));
    let source = "impl<S: Shape> Tensor<S> {\n    pub fn a(&self) {\n        if x { }\n    }\n    fn hidden() {}\n}\nimpl Other {\n    pub fn b() {}\n}\n";
    assert_eq!(typed_methods(source), vec!["a".to_string()]);
}
