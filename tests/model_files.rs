//! Model files: weights exported from PyTorch load by name into the same rumus model and give
//! the same logits; files round-trip; bad files and mismatched models are errors.

mod common;

use common::fixture_file::read_cases;
use rumus::io::{load_safetensors, read_state, save_safetensors, write_state};
use rumus::prelude::*;

#[model]
struct SmallCnn {
    conv1: Conv2d<1, 4, 3>,
    conv2: Conv2d<4, 8, 3>,
    fc: Linear<32, 10>,
}

#[model]
impl SmallCnn {
    tensor_fn! {
        fn forward(&self, x: [B, 1, 10, 10]) -> [B, 10] {
            let h = self.conv1(x).relu().max_pool2d(2);
            let h = self.conv2(h).relu();
            self.fc(h.flatten(1))
        }
    }
}

const WEIGHTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/small_cnn.safetensors"
);

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rumus-model-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn pytorch_weights_give_pytorch_logits() {
    let model = SmallCnn::new().unwrap();
    load_safetensors(&model, WEIGHTS).unwrap();
    let cases = read_cases(include_str!("fixtures/small_cnn.txt"));
    let case = &cases[0].1;
    let x = DynTensor::from_vec(
        case["x"].values.iter().map(|&v| v as f32).collect(),
        &case["x"].dims,
    )
    .unwrap();
    let x: Tensor<(Dyn, D<1>, D<10>, D<10>)> = x.try_shape().unwrap();
    let logits = model.forward(&x).unwrap().to_vec().unwrap();
    for (i, (a, e)) in logits.iter().zip(&case["logits"].values).enumerate() {
        assert!(
            (*a as f64 - e).abs() <= 1e-5,
            "logit {i}: rumus {a}, torch {e}"
        );
    }
}

#[test]
fn save_then_load_round_trips() {
    manual_seed(5);
    let model = SmallCnn::new().unwrap();
    let path = scratch("round_trip.safetensors");
    save_safetensors(&model, &path).unwrap();
    let other = SmallCnn::new().unwrap();
    load_safetensors(&other, &path).unwrap();
    for ((n1, a), (n2, b)) in model
        .named_parameters()
        .iter()
        .zip(other.named_parameters().iter())
    {
        assert_eq!(n1, n2);
        assert_eq!(a.to_vec::<f32>().unwrap(), b.to_vec::<f32>().unwrap());
    }
}

#[test]
fn a_wrong_shape_or_missing_key_is_an_error_and_changes_nothing() {
    let model = SmallCnn::new().unwrap();
    let before = model.state_dict().unwrap();
    let mut state = read_state(WEIGHTS).unwrap();
    let fc = state.iter_mut().find(|(n, _)| n == "fc.weight").unwrap();
    fc.1 = DynTensor::zeros(&[10, 31], DType::F32).unwrap();
    let path = scratch("wrong_shape.safetensors");
    write_state(&state, &path).unwrap();
    let err = load_safetensors(&model, &path).unwrap_err().to_string();
    assert!(
        err.contains("fc.weight") && err.contains("[10, 32]") && err.contains("[10, 31]"),
        "{err}"
    );

    state.retain(|(n, _)| n != "fc.weight");
    write_state(&state, &path).unwrap();
    let err = load_safetensors(&model, &path).unwrap_err().to_string();
    assert!(err.contains("missing keys [\"fc.weight\"]"), "{err}");
    for ((_, a), (_, b)) in before.iter().zip(model.state_dict().unwrap().iter()) {
        assert_eq!(
            a.to_vec::<f32>().unwrap(),
            b.to_vec::<f32>().unwrap(),
            "nothing was loaded"
        );
    }
}

#[test]
fn unexpected_keys_and_corrupt_files_are_errors() {
    let model = SmallCnn::new().unwrap();
    let mut state = read_state(WEIGHTS).unwrap();
    state.push((
        "head.weight".into(),
        DynTensor::zeros(&[2], DType::F32).unwrap(),
    ));
    let path = scratch("extra.safetensors");
    write_state(&state, &path).unwrap();
    let err = load_safetensors(&model, &path).unwrap_err().to_string();
    assert!(err.contains("unexpected keys [\"head.weight\"]"), "{err}");

    let bytes = std::fs::read(WEIGHTS).unwrap();
    let truncated = scratch("truncated.safetensors");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let err = load_safetensors(&model, &truncated)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("truncated.safetensors") && err.contains("not a valid safetensors file"),
        "{err}"
    );
    let err = load_safetensors(&model, scratch("missing.safetensors"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.safetensors"), "{err}");
}

/// Values of tests/fixtures/dtypes.safetensors, recomputed from the formulas in
/// make_safetensors_dtypes.py (value i of a tensor comes from its flat index i).
fn check_dtypes_file(state: &[(String, DynTensor)]) {
    let tensor = |name: &str| {
        &state
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no tensor `{name}`"))
            .1
    };
    let f32s = tensor("f32");
    assert_eq!((f32s.dtype(), f32s.dims()), (DType::F32, &[2, 3][..]));
    let expected: Vec<f32> = (0..6).map(|i| i as f32 * 0.5 - 1.0).collect();
    assert_eq!(f32s.to_vec::<f32>().unwrap(), expected);
    let f64s = tensor("f64");
    assert_eq!((f64s.dtype(), f64s.dims()), (DType::F64, &[4, 1][..]));
    let expected: Vec<f64> = (0..4).map(|i| i as f64 / 3.0).collect();
    assert_eq!(f64s.to_vec::<f64>().unwrap(), expected);
    let f16s = tensor("f16");
    assert_eq!(f16s.dtype(), DType::F16);
    let expected: Vec<rumus::f16> = (0..5)
        .map(|i| rumus::f16::from_f32(i as f32 * 0.25))
        .collect();
    assert_eq!(f16s.to_vec::<rumus::f16>().unwrap(), expected);
    let i64s = tensor("i64");
    assert_eq!(i64s.dtype(), DType::I64);
    assert_eq!(i64s.to_vec::<i64>().unwrap(), [0, -7, -14]);
    let bools = tensor("bool");
    assert_eq!(bools.dtype(), DType::Bool);
    assert_eq!(bools.to_vec::<bool>().unwrap(), [true, false, false, true]);
    let empty = tensor("empty");
    assert_eq!((empty.dims(), empty.numel()), (&[0, 2][..], 0));
}

#[test]
fn files_from_the_reference_writer_read_in_every_dtype() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/dtypes.safetensors"
    );
    let state = read_state(path).unwrap();
    let names: Vec<&str> = state.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["bool", "empty", "f16", "f32", "f64", "i64"]);
    check_dtypes_file(&state);

    // Written back by rumus and read again, every tensor is unchanged.
    let copy = scratch("dtypes.safetensors");
    write_state(&state, &copy).unwrap();
    check_dtypes_file(&read_state(&copy).unwrap());
}
