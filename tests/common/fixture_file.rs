//! Reader for the committed reference files (`tests/fixtures/*.txt`): `case NAME`, then
//! `tensor KEY DTYPE DIMS VALUES...` lines, then `end`.
#![allow(dead_code)]

use std::collections::BTreeMap;

/// One tensor of a case: dims and values (as f64, whatever the stored dtype).
#[derive(Debug, Clone)]
pub struct FixtureTensor {
    pub dtype: String,
    pub dims: Vec<usize>,
    pub values: Vec<f64>,
}

/// Cases by name, each a map from key to tensor, in file order.
pub fn read_cases(text: &str) -> Vec<(String, BTreeMap<String, FixtureTensor>)> {
    let mut cases = Vec::new();
    let mut current: Option<(String, BTreeMap<String, FixtureTensor>)> = None;
    for (number, line) in text.lines().enumerate() {
        let at = || format!("fixture line {}", number + 1);
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        match words.next() {
            Some("case") => {
                current = Some((
                    words
                        .next()
                        .unwrap_or_else(|| panic!("{}: case without a name", at()))
                        .to_string(),
                    BTreeMap::new(),
                ))
            }
            Some("end") => cases.push(
                current
                    .take()
                    .unwrap_or_else(|| panic!("{}: `end` outside a case", at())),
            ),
            Some("tensor") => {
                let (key, dtype, dims) = match (words.next(), words.next(), words.next()) {
                    (Some(k), Some(t), Some(d)) => (k, t, d),
                    _ => panic!("{}: a tensor line needs KEY DTYPE DIMS", at()),
                };
                let dims: Vec<usize> = if dims == "-" {
                    Vec::new()
                } else {
                    dims.split(',')
                        .map(|d| {
                            d.parse()
                                .unwrap_or_else(|_| panic!("{}: bad dim {d}", at()))
                        })
                        .collect()
                };
                let values: Vec<f64> = words
                    .map(|v| {
                        v.parse()
                            .unwrap_or_else(|_| panic!("{}: bad value {v}", at()))
                    })
                    .collect();
                assert_eq!(
                    values.len(),
                    dims.iter().product::<usize>(),
                    "{}: value count does not match dims {dims:?}",
                    at()
                );
                let case = current
                    .as_mut()
                    .unwrap_or_else(|| panic!("{}: tensor outside a case", at()));
                case.1.insert(
                    key.to_string(),
                    FixtureTensor {
                        dtype: dtype.to_string(),
                        dims,
                        values,
                    },
                );
            }
            other => panic!("{}: unexpected record {other:?}", at()),
        }
    }
    assert!(current.is_none(), "the last case has no `end`");
    cases
}

impl FixtureTensor {
    /// The fixture as a tensor of its stored dtype (`f32`, `f64`, `f16`, `bf16`, `i64` or `bool`).
    pub fn to_tensor(&self) -> rumus::DynTensor {
        let dims = &self.dims;
        match self.dtype.as_str() {
            "f32" => {
                rumus::DynTensor::from_vec(self.values.iter().map(|&v| v as f32).collect(), dims)
            }
            "f64" => rumus::DynTensor::from_vec(self.values.clone(), dims),
            "f16" => rumus::DynTensor::from_vec(
                self.values
                    .iter()
                    .map(|&v| rumus::f16::from_f64(v))
                    .collect(),
                dims,
            ),
            "bf16" => rumus::DynTensor::from_vec(
                self.values
                    .iter()
                    .map(|&v| rumus::bf16::from_f64(v))
                    .collect(),
                dims,
            ),
            "i64" => {
                rumus::DynTensor::from_vec(self.values.iter().map(|&v| v as i64).collect(), dims)
            }
            "bool" => {
                rumus::DynTensor::from_vec(self.values.iter().map(|&v| v != 0.0).collect(), dims)
            }
            other => panic!("unexpected fixture dtype {other}"),
        }
        .unwrap()
    }
}

/// `actual` has the fixture's shape and every value within `1e-5 + 1e-5 |expected|`.
pub fn assert_close(case: &str, key: &str, actual: &rumus::DynTensor, expected: &FixtureTensor) {
    assert_eq!(
        actual.dims(),
        expected.dims.as_slice(),
        "{case}: {key}: shape"
    );
    for (i, (a, e)) in actual.to_f64_vec().iter().zip(&expected.values).enumerate() {
        assert!(
            (a - e).abs() <= 1e-5 + 1e-5 * e.abs(),
            "{case}: {key}[{i}]: rumus {a:e}, torch {e:e}"
        );
    }
}

/// Case `name` of the fixture file `text` (panics naming it when absent).
pub fn case(text: &str, name: &str) -> BTreeMap<String, FixtureTensor> {
    read_cases(text)
        .into_iter()
        .find(|(case, _)| case == name)
        .unwrap_or_else(|| panic!("no fixture case {name}"))
        .1
}

/// A 16-bit float type (`f16`, `bf16`), compared bit for bit.
pub trait HalfBits: Copy + std::fmt::Display + rumus::element::Element {
    fn bits(self) -> u16;
    fn nan(self) -> bool;
    fn widened(self) -> f32;
}

/// The same methods of both `half` types.
macro_rules! half_bits {
    ($($t:ty),*) => {$(
        impl HalfBits for $t {
            fn bits(self) -> u16 {
                self.to_bits()
            }
            fn nan(self) -> bool {
                self.is_nan()
            }
            fn widened(self) -> f32 {
                self.to_f32()
            }
        }
    )*};
}
half_bits!(rumus::f16, rumus::bf16);

/// `input` (f32) rounded to `T`'s dtype gives `expected` (PyTorch's rounding) bit for bit,
/// directly and through f64 (which holds every f32 exactly, so one rounding happens), and
/// every result widens back to f32 exactly.
pub fn assert_rounds_as_expected<T: HalfBits>(input: &rumus::DynTensor, expected: &[T]) {
    let dtype = <T as rumus::element::Element>::DTYPE;
    let direct = input.to_dtype(dtype).unwrap().to_vec::<T>().unwrap();
    assert_same_bits(&format!("f32 -> {dtype}"), &direct, expected);
    let through_f64 = input
        .to_dtype(rumus::DType::F64)
        .unwrap()
        .to_dtype(dtype)
        .unwrap();
    let rounded = through_f64.to_vec::<T>().unwrap();
    assert_same_bits(&format!("f64 -> {dtype}"), &rounded, expected);
    let widened = through_f64
        .to_dtype(rumus::DType::F32)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    for (w, h) in widened.iter().zip(expected) {
        assert!(
            w.to_bits() == h.widened().to_bits() || w.is_nan(),
            "{dtype} -> f32: {h} as {w}"
        );
    }
}

/// Bit-for-bit equality (so `-0` differs from `0`), NaN equal to NaN.
pub fn assert_same_bits<T: HalfBits>(what: &str, actual: &[T], expected: &[T]) {
    assert_eq!(actual.len(), expected.len(), "{what}: lengths differ");
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        let same = a.bits() == e.bits() || (a.nan() && e.nan());
        assert!(
            same,
            "{what}[{i}]: got {a} ({:#06x}), expected {e} ({:#06x})",
            a.bits(),
            e.bits()
        );
    }
}
