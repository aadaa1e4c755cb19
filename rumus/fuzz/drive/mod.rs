//! What each fuzz target does with its input, in one place for the targets
//! (`fuzz_targets/*.rs`) and for `tests/fuzz_regressions.rs`, which replays the seeds and every
//! flagged input through the same functions without a fuzzer. Both include this folder with
//! `#[path]`.
//!
//! Every driver takes the fuzzer's bytes and returns `Ok` when rumus accepted the input all the
//! way through (seeds must), `Err` when it refused it (fine for a fuzzer); it panics only
//! when an invariant of rumus is broken, which is what a fuzzer reports.

// Each target calls one driver; the rest of this module is unused there.
#![allow(dead_code)]

pub mod checkpoint;
pub mod csv;
pub mod gguf;
pub mod idx;
pub mod images;
pub mod loader;
pub mod onnx;
pub mod records;
pub mod scratch;
pub mod weights;

use rumus::{DType, DynTensor};

/// A driver: the fuzzer's bytes in, `Ok` when rumus accepted them.
pub type Driver = fn(&[u8]) -> rumus::Result<()>;

/// Every fuzz target (as named in `Cargo.toml`) and its driver.
pub const TARGETS: &[(&str, Driver)] = &[
    ("idx_reader", idx::run),
    ("record_reader", records::from_bytes),
    ("record_file_open", records::open),
    ("checkpoint_loader", checkpoint::load),
    ("checkpoint_structure", checkpoint::structured),
    ("weights_loader", weights::run),
    ("csv_reader", csv::run),
    ("image_set", images::run),
    ("data_loader", loader::run),
    ("onnx_import", onnx::run),
    ("gguf_reader", gguf::run),
];

/// The error for an input too short for a driver's framing (option bytes, part lengths).
pub fn framing(message: &str) -> rumus::Error {
    rumus::Error::InvalidArgument {
        op: "fuzz input",
        message: message.to_string(),
    }
}

/// The values of `t` as bit patterns, every NaN alike (a copy may change a NaN's payload).
pub fn bits(t: &DynTensor) -> rumus::Result<Vec<u64>> {
    let float = |x: f64| if x.is_nan() { u64::MAX } else { x.to_bits() };
    Ok(match t.dtype() {
        DType::F32 => t
            .to_vec::<f32>()?
            .into_iter()
            .map(|x| float(x.into()))
            .collect(),
        DType::F64 => t.to_vec::<f64>()?.into_iter().map(float).collect(),
        DType::F16 => t
            .to_vec::<rumus::f16>()?
            .into_iter()
            .map(|x| float(x.into()))
            .collect(),
        DType::I64 => t.to_vec::<i64>()?.into_iter().map(|x| x as u64).collect(),
        DType::Bool => t.to_vec::<bool>()?.into_iter().map(u64::from).collect(),
        // Dtypes added later: their values as f64.
        _ => t.to_vec::<f64>()?.into_iter().map(float).collect(),
    })
}

/// Whether two state dicts hold the same names, dims, dtypes and values (in any order).
pub fn same_state(a: &[(String, DynTensor)], b: &[(String, DynTensor)]) -> bool {
    let key = |state: &[(String, DynTensor)]| {
        let mut out: Vec<_> = state
            .iter()
            .map(|(n, t)| (n.clone(), t.dims().to_vec(), t.dtype(), bits(t).ok()))
            .collect();
        out.sort_by(|x, y| x.0.cmp(&y.0));
        out
    };
    key(a) == key(b)
}
