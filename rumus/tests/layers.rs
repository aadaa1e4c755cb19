//! Layers that only point down: a module of rumus may use only modules of its own layer or of
//! lower ones. Bottom to top:
//!
//! 0. foundation: `error`, `dtype`, `shape`, `alloc`, `live_counts`, `rng`
//! 1. `backend`: kernels on buffers and layouts (`backend::cpu`, `backend::gpu`, the backend
//!    contract traits) and the op descriptors the kernels need (`UnaryOp`, `BinaryOp`, ...,
//!    re-exported from `ops` under their public paths); `element`, the host element types
//!    and their `backend::cpu::CpuBuffer` vectors
//! 2. `storage`, `device`: the `Storage` enum over backend buffers, which dispatches each op to
//!    its backend once; `Device` wraps the backend devices
//! 3. `tensor`
//! 4. `autograd`: the tape (nodes holding type-erased backward records), the engine, the
//!    gradient store, grad mode; it names no op
//! 5. `ops`: the differentiable ops, their shape rules and backward formulas, and the one hook
//!    point every op runs through
//! 6. hooks: `amp`, `onnx` (they register themselves with the ops-level hook point; `ops` never
//!    names them); `sparse`, sparse matrices and message passing written with the ops
//! 7. `nn`
//! 8. `optim`
//! 9. `train`, `data`, `io`, `distributed`
//!
//! `lib.rs` is the crate root above every layer, and `private`, the support code the macros'
//! generated code calls (it reaches tensors, ops and nn), sits with it. Only code counts: `crate::x` (and `$crate::x`)
//! in `use` lines and in paths; comments, doc comments, doc links and string literals do not.
//! An item re-exported at the crate root (`crate::Device`) counts as its defining module.
//!
//! The check reads `rumus/src` and lists each upward reference as
//! `file:line: <from> (layer N) uses <to> (layer M)`. The few known upward references that
//! other work removes are listed in [`EXCEPTIONS`] with the reason and what removes them; the
//! list may only shrink, and an entry no longer needed fails the check too.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Every top-level module of `rumus/src` and its layer (see the file's doc comment).
const LAYERS: &[(&str, u8)] = &[
    ("error", 0),
    ("dtype", 0),
    ("shape", 0),
    ("alloc", 0),
    ("live_counts", 0),
    ("rng", 0),
    ("backend", 1),
    ("element", 1),
    ("storage", 2),
    ("device", 2),
    ("tensor", 3),
    ("autograd", 4),
    ("ops", 5),
    ("amp", 6),
    ("onnx", 6),
    ("sparse", 6),
    ("nn", 7),
    ("optim", 8),
    ("train", 9),
    ("data", 9),
    ("io", 9),
    ("distributed", 9),
    ("llm", 10),
    ("private", 11),
];

/// Items `lib.rs` re-exports at the crate root, and the module each stands for (`None`: from
/// another crate, outside the rule). A `crate::Name` missing here fails the check, so the
/// table follows lib.rs.
const ROOT_ITEMS: &[(&str, Option<&str>)] = &[
    ("GradientStore", Some("autograd")),
    ("grad", Some("autograd")),
    ("gradcheck", Some("autograd")),
    ("no_grad", Some("autograd")),
    ("Device", Some("device")),
    ("DType", Some("dtype")),
    ("AutogradError", Some("error")),
    ("DeviceError", Some("error")),
    ("Error", Some("error")),
    ("Result", Some("error")),
    ("ShapeError", Some("error")),
    ("f16", None),
    ("manual_seed", Some("rng")),
    ("model", None),
    ("tensor_fn", None),
    ("D", Some("shape")),
    ("Dim", Some("shape")),
    ("Dyn", Some("shape")),
    ("Shape", Some("shape")),
    ("DynTensor", Some("tensor")),
    ("Elementwise", Some("tensor")),
    ("StaticShape", Some("tensor")),
    ("Tensor", Some("tensor")),
    ("__private", Some("private")),
];

/// Why a known upward reference is still there, and the work that removes it.
struct Why {
    reason: &'static str,
    removed_by: &'static str,
}

/// A known upward reference: the file (under `rumus/src`) and the module it uses.
struct Exception {
    file: &'static str,
    uses: &'static str,
    why: &'static Why,
}

const fn exception(file: &'static str, uses: &'static str, why: &'static Why) -> Exception {
    Exception { file, uses, why }
}

/// Backend kernels that still take tensors, storages or `ops`' descriptors.
const BACKEND_CONTRACT: Why = Why {
    reason: "a backend kernel takes a tensor, a storage or an ops descriptor, not buffers and layouts",
    removed_by: "issue 39, backend contract: kernels on buffers and layouts, op descriptors in backend",
};
const TRACE_HOOK: Why = Why {
    reason: "the op calls the ONNX tracer itself (the `*_untraced` twins)",
    removed_by: "the ops hook layer (ops/hooks.rs): onnx registers its tracer there",
};
const AUTOCAST_HOOK: Why = Why {
    reason: "the op asks amp whether autocast is on and runs its half product",
    removed_by: "the ops hook layer (ops/hooks.rs): amp registers autocast there",
};
const ONNX_MODELS: Why = Why {
    reason: "onnx is the trace hook (layer 6) and also imports and exports whole models (nn, io)",
    removed_by: "the ops hook layer: the tracer keeps to ops' op descriptions, model import/export sits above nn",
};
const SCALER_PATH: Why = Why {
    reason: "amp re-exports optim's GradScaler under rumus::amp",
    removed_by: "the ops hook layer's amp rework: the public path moves up to a layer above optim",
};
const TENSOR_TAPE: Why = Why {
    reason: "a tensor carries its tape metadata (GradMeta, Node) and typed tensors read GradientStore",
    removed_by: "issue 39: the tensor holds its grad metadata behind an interface autograd implements",
};

/// Known upward references. This list may only shrink: an entry no longer needed fails the
/// check.
const EXCEPTIONS: &[Exception] = &[
    exception("backend/cpu/pool.rs", "storage", &BACKEND_CONTRACT),
    exception("backend/gpu/int8.rs", "device", &BACKEND_CONTRACT),
    exception("backend/gpu/transfer.rs", "storage", &BACKEND_CONTRACT),
    exception("onnx/import_norm_ops.rs", "nn", &ONNX_MODELS),
    exception("onnx/export.rs", "io", &ONNX_MODELS),
    exception("onnx/export.rs", "nn", &ONNX_MODELS),
    exception("onnx/dynamic.rs", "nn", &ONNX_MODELS),
    exception("amp.rs", "optim", &SCALER_PATH),
    exception("tensor/mod.rs", "autograd", &TENSOR_TAPE),
    exception("tensor/typed.rs", "autograd", &TENSOR_TAPE),
];

/// One reference from a file to a top-level module.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reference {
    /// 1-based line in the file.
    line: usize,
    /// The top-level module named after `crate::`, or `None` for a root item from another
    /// crate.
    module: Result<Option<&'static str>, String>,
}

fn layer_of(module: &str) -> Option<u8> {
    LAYERS
        .iter()
        .find(|(name, _)| *name == module)
        .map(|&(_, layer)| layer)
}

/// The top-level module a file of `rumus/src` belongs to (`ops/unary.rs` -> `ops`), `None` for
/// the crate root `lib.rs`.
fn module_of(file: &str) -> Option<&str> {
    let first = file.split('/').next()?;
    let module = first.strip_suffix(".rs").unwrap_or(first);
    (module != "lib").then_some(module)
}

/// The source with comments and the contents of string and char literals replaced by spaces,
/// newlines kept, so what is left is code with its line numbers.
fn code_only(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0usize;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && matches!(next, Some('"') | Some('#'))
            && (i == 0 || !is_ident(chars[i - 1]))
        {
            // Raw string r"..." or r#"..."#.
            let mut j = i + 1;
            let mut hashes = 0;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            let closing: String = std::iter::once('"')
                .chain((0..hashes).map(|_| '#'))
                .collect();
            let rest: String = chars[j..].iter().collect();
            let end = rest.find(&closing).map_or(chars.len(), |at| {
                j + rest[..at].chars().count() + closing.len()
            });
            for &k in &chars[i..end] {
                out.push(blank(k));
            }
            i = end;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < chars.len() {
                    out.push(blank(chars[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            // A char literal ('a', '\n', '\''); a lifetime has no closing quote.
            let start = i;
            i += 1;
            if chars.get(i) == Some(&'\\') {
                i += 2;
            }
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
            for _ in start..i.min(chars.len()) {
                out.push(' ');
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The identifier at the start of `text` after spaces.
fn leading_ident(text: &str) -> &str {
    let text = text.trim_start();
    let end = text.find(|c: char| !is_ident(c)).unwrap_or(text.len());
    &text[..end]
}

/// The module a name right after `crate::` stands for.
fn resolve(name: &str) -> Result<Option<&'static str>, String> {
    if let Some(&(module, _)) = LAYERS.iter().find(|(module, _)| *module == name) {
        return Ok(Some(module));
    }
    if let Some(&(_, module)) = ROOT_ITEMS.iter().find(|(item, _)| *item == name) {
        return Ok(module);
    }
    Err(name.to_string())
}

/// Every `crate::<name>` reference in a file's code, with grouped imports
/// (`use crate::{a::X, b}`) split into their top-level names.
fn references(source: &str) -> Vec<Reference> {
    let code = code_only(source);
    let line_at = |at: usize| code[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(pos) = code[from..].find("crate::") {
        let at = from + pos;
        from = at + "crate::".len();
        let before = code[..at].chars().next_back();
        if before.is_some_and(is_ident) {
            continue;
        }
        let rest = &code[from..];
        let trimmed = rest.trim_start();
        if let Some(group) = trimmed.strip_prefix('{') {
            // The top-level names of a group: after `{` and after each `,` at depth one.
            let group_at = code.len() - group.len();
            let mut depth = 1;
            let mut item_start = 0;
            for (k, c) in group.char_indices() {
                let end_of_item = match c {
                    '{' => {
                        depth += 1;
                        false
                    }
                    '}' => {
                        depth -= 1;
                        depth == 0
                    }
                    ',' => depth == 1,
                    _ => false,
                };
                if end_of_item {
                    let item = &group[item_start..k];
                    let name = leading_ident(item);
                    if !name.is_empty() && name != "self" {
                        let offset = item.find(name).unwrap_or(0);
                        found.push(Reference {
                            line: line_at(group_at + item_start + offset),
                            module: resolve(name),
                        });
                    }
                    item_start = k + 1;
                }
                if depth == 0 {
                    break;
                }
            }
        } else {
            let name = leading_ident(rest);
            if !name.is_empty() {
                found.push(Reference {
                    line: line_at(at),
                    module: resolve(name),
                });
            }
        }
    }
    found
}

/// The check over `(path under rumus/src, source)` pairs: each upward reference as
/// `(file, target module, message)`, and a message for each name the tables do not know.
fn check(files: &[(String, String)]) -> (Vec<(String, String, String)>, Vec<String>) {
    let mut upward = Vec::new();
    let mut unknown = Vec::new();
    for (file, source) in files {
        let Some(from) = module_of(file) else {
            continue;
        };
        let Some(from_layer) = layer_of(from) else {
            unknown.push(format!(
                "{file}: top-level module `{from}` has no layer: add it to LAYERS in rumus/tests/layers.rs"
            ));
            continue;
        };
        for reference in references(source) {
            match reference.module {
                Ok(Some(to)) => {
                    let to_layer = layer_of(to).expect("resolve returns modules of LAYERS");
                    if to_layer > from_layer {
                        upward.push((
                            file.clone(),
                            to.to_string(),
                            format!(
                                "{file}:{}: {from} (layer {from_layer}) uses {to} (layer {to_layer})",
                                reference.line
                            ),
                        ));
                    }
                }
                Ok(None) => {}
                Err(name) => unknown.push(format!(
                    "{file}:{}: `crate::{name}` is neither a module nor a root item known to rumus/tests/layers.rs",
                    reference.line
                )),
            }
        }
    }
    (upward, unknown)
}

fn rust_files(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, root, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let relative = path
                .strip_prefix(root)
                .expect("under src")
                .to_string_lossy()
                .replace('\\', "/");
            let source = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            out.push((relative, source));
        }
    }
}

/// The check's verdict on `files` against `exceptions`: one line per unknown name, per
/// upward reference no exception covers and per exception nothing needs; empty when the rule
/// holds.
fn report(files: &[(String, String)], exceptions: &[Exception]) -> String {
    let (upward, unknown) = check(files);
    let mut report = String::new();
    for message in &unknown {
        writeln!(report, "{message}").unwrap();
    }
    let mut used = BTreeSet::new();
    for (file, to, message) in &upward {
        match exceptions
            .iter()
            .position(|e| e.file == file && e.uses == to)
        {
            Some(index) => {
                used.insert(index);
            }
            None => writeln!(report, "{message}").unwrap(),
        }
    }
    for (index, exception) in exceptions.iter().enumerate() {
        if !used.contains(&index) {
            writeln!(
                report,
                "exception no longer needed, remove it from EXCEPTIONS: {} uses {} ({}; removed by {})",
                exception.file, exception.uses, exception.why.reason, exception.why.removed_by
            )
            .unwrap();
        }
    }
    report
}

#[test]
fn no_module_uses_a_higher_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &src, &mut files);
    assert!(
        files.len() > 50,
        "found only {} files under {}",
        files.len(),
        src.display()
    );
    let report = report(&files, EXCEPTIONS);
    assert!(
        report.is_empty(),
        "the layer rule (rumus/tests/layers.rs) is broken:\n{report}"
    );
}

#[test]
fn an_exception_no_longer_needed_is_reported() {
    let files = [("ops/x.rs".to_string(), "use crate::onnx::op;\n".to_string())];
    let covered = [exception("ops/x.rs", "onnx", &TRACE_HOOK)];
    assert_eq!(report(&files, &covered), "");
    let stale = [
        exception("ops/x.rs", "onnx", &TRACE_HOOK),
        exception("ops/y.rs", "amp", &AUTOCAST_HOOK),
    ];
    let verdict = report(&files, &stale);
    assert!(
        verdict.starts_with(
            "exception no longer needed, remove it from EXCEPTIONS: ops/y.rs uses amp"
        ) && verdict.lines().count() == 1,
        "{verdict}"
    );
    assert_eq!(
        report(&files, &[]),
        "ops/x.rs:1: ops (layer 5) uses onnx (layer 6)\n"
    );
}

fn one_file(file: &str, source: &str) -> Vec<String> {
    let (upward, unknown) = check(&[(file.to_string(), source.to_string())]);
    assert!(unknown.is_empty(), "{unknown:?}");
    upward.into_iter().map(|(_, _, message)| message).collect()
}

#[test]
fn an_upward_use_is_reported() {
    let source = "use crate::tensor::DynTensor;\nuse crate::nn::Linear;\n";
    assert_eq!(
        one_file("autograd/engine.rs", source),
        ["autograd/engine.rs:2: autograd (layer 4) uses nn (layer 7)"]
    );
}

#[test]
fn grouped_uses_paths_and_root_items_are_references() {
    let source = "use crate::{\n    error::Result,\n    optim::{Sgd, Adam},\n};\n\
                  fn f() { crate::train::fit(); let d: crate::DynTensor; let g = crate::GradientStore::new(); }\n";
    assert_eq!(
        one_file("tensor/view.rs", source),
        [
            "tensor/view.rs:3: tensor (layer 3) uses optim (layer 8)",
            "tensor/view.rs:5: tensor (layer 3) uses train (layer 9)",
            "tensor/view.rs:5: tensor (layer 3) uses autograd (layer 4)",
        ]
    );
}

#[test]
fn comments_doc_links_and_strings_are_not_references() {
    let source = "//! See [`crate::nn::Linear`].\n/// Calls [crate::optim::Sgd].\n\
                  // use crate::train::Trainer;\n/* crate::io::load */\n\
                  fn f() -> &'static str { let _c = '\"'; \"crate::data::Loader\" }\n\
                  fn g() -> &'static str { r#\"crate::amp::autocast\"# }\nuse crate::dtype::DType;\n";
    assert_eq!(one_file("tensor/mod.rs", source), Vec::<String>::new());
}

#[test]
fn a_name_the_tables_do_not_know_is_reported() {
    let (_, unknown) = check(&[(
        "ops/x.rs".to_string(),
        "use crate::newmodule::X;\n".to_string(),
    )]);
    assert_eq!(unknown.len(), 1, "{unknown:?}");
    let (_, unknown) = check(&[("newmodule.rs".to_string(), "fn f() {}\n".to_string())]);
    assert_eq!(unknown.len(), 1, "{unknown:?}");
}
