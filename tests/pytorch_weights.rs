//! PyTorch state dicts as PyTorch writes them: a torchvision-style ResNet (bias-free
//! convolutions, BatchNorm with `num_batches_tracked`, `nn.Sequential` children named `0`,
//! `1`) saved by `safetensors.torch.save_file` loads by name and gives PyTorch's logits;
//! one stage loads alone from the same file; non-strict loading reports what did not
//! match; parameters and buffers are counted apart; `to_dtype` converts in place.
//! The fixtures come from `tests/fixtures/make_resnet_weights.py`.

mod common;

use std::collections::BTreeMap;

use common::fixture_file::{FixtureTensor, read_cases};
use common::resnet::{Backbone, Layer2, SmallResNet};
use rumus::io::{load_safetensors, load_safetensors_with, read_state, save_safetensors};
use rumus::nn::{LoadOptions, LoadReport};
use rumus::prelude::*;

/// The fixture's weights, under the package's folder: `CARGO_MANIFEST_DIR` at run time where
/// it is set (cargo sets it; `tests/gpu_suite.sh` too, for binaries built in another
/// checkout), else the folder the binary was built in.
static WEIGHTS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let root = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    format!("{root}/tests/fixtures/small_resnet.safetensors")
});

fn fixture() -> BTreeMap<String, FixtureTensor> {
    read_cases(include_str!("fixtures/small_resnet.txt"))
        .remove(0)
        .1
}

fn input(case: &BTreeMap<String, FixtureTensor>, key: &str, dtype: DType) -> DynTensor {
    DynTensor::from_vec(case[key].values.clone(), &case[key].dims)
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
}

fn assert_close(what: &str, actual: &DynTensor, expected: &FixtureTensor, tolerance: f64) {
    assert_eq!(actual.dims(), expected.dims.as_slice(), "{what}: shape");
    for (i, (a, e)) in actual.to_f64_vec().iter().zip(&expected.values).enumerate() {
        assert!(
            (a - e).abs() <= tolerance,
            "{what}[{i}]: rumus {a}, torch {e}"
        );
    }
}

fn loaded_resnet() -> SmallResNet {
    let model = SmallResNet::new().unwrap();
    load_safetensors(&model, WEIGHTS.as_str()).unwrap();
    model.eval();
    model
}

#[test]
fn torchvision_style_resnet_weights_give_pytorch_logits() {
    let case = fixture();
    let model = loaded_resnet();
    let logits = model.forward(&input(&case, "x", DType::F32)).unwrap();
    assert_close("logits", &logits, &case["logits"], 1e-5);
}

#[test]
fn parameters_and_buffers_are_counted_apart_as_in_pytorch() {
    let case = fixture();
    let model = loaded_resnet();
    assert_eq!(
        model.num_parameters() as f64,
        case["num_parameters"].values[0],
        "trainable parameters, as PyTorch's sum(p.numel() for p in model.parameters())"
    );
    // Every name of the file, and nothing else, is a parameter or a buffer.
    let file: Vec<String> = read_state(WEIGHTS.as_str())
        .unwrap()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let mut ours: Vec<String> = model
        .named_tensors()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    ours.sort();
    assert_eq!(ours, file);
    let buffers = model.named_buffers();
    assert!(
        buffers
            .iter()
            .all(|(name, _)| name.contains("running_") || name.ends_with("num_batches_tracked"))
    );
    assert!(
        !model
            .named_parameters()
            .iter()
            .any(|(name, _)| name.contains("running_") || name.contains("num_batches")),
        "no buffer is a parameter"
    );
    // The counter came in with its value and dtype.
    let saved = read_state(WEIGHTS.as_str()).unwrap();
    let (_, file_count) = saved
        .iter()
        .find(|(name, _)| name == "bn1.num_batches_tracked")
        .unwrap();
    assert_eq!(file_count.dtype(), DType::I64);
    assert_eq!(
        model.bn1.num_batches_tracked.to_vec::<i64>().unwrap(),
        file_count.to_vec::<i64>().unwrap()
    );
}

#[test]
fn one_stage_loads_alone_from_the_whole_models_file() {
    let case = fixture();
    let stage = Layer2::new().unwrap();
    let report = load_safetensors_with(
        &stage,
        WEIGHTS.as_str(),
        &LoadOptions::new().prefix("layer2"),
    )
    .unwrap();
    assert_eq!(report, LoadReport::default(), "every key under layer2.");
    stage.eval();
    let out = stage
        .0
        .forward(&input(&case, "layer2_in", DType::F32))
        .unwrap();
    assert_close("layer2", &out, &case["layer2_out"], 1e-5);
}

#[test]
fn non_strict_loading_reports_what_did_not_match() {
    let case = fixture();
    let backbone = Backbone::new().unwrap();
    let before = backbone.state_dict().unwrap();
    let message = load_safetensors(&backbone, WEIGHTS.as_str())
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("small_resnet.safetensors")
            && message.contains("fc.weight")
            && message.contains("strict(false)"),
        "{message}"
    );
    for ((name, a), (_, b)) in before.iter().zip(backbone.state_dict().unwrap().iter()) {
        assert_eq!(
            a.to_f64_vec(),
            b.to_f64_vec(),
            "{name} unchanged by a failed load"
        );
    }

    let report = load_safetensors_with(
        &backbone,
        WEIGHTS.as_str(),
        &LoadOptions::new().strict(false),
    )
    .unwrap();
    assert_eq!(report.missing_keys, Vec::<String>::new());
    assert_eq!(report.unexpected_keys, vec!["fc.bias", "fc.weight"]);

    // The other way round: a model with more than the file keeps what the file lacks.
    let model = SmallResNet::new().unwrap();
    let stem = LoadOptions::new().strict(false);
    let fc_before = model.fc.weight.to_f64_vec();
    let state: Vec<_> = read_state(WEIGHTS.as_str())
        .unwrap()
        .into_iter()
        .filter(|(name, _)| !name.starts_with("fc."))
        .collect();
    let report = model.load_state_dict_with(&state, &stem).unwrap();
    assert_eq!(report.missing_keys, vec!["fc.bias", "fc.weight"]);
    assert!(report.unexpected_keys.is_empty());
    assert_eq!(model.fc.weight.to_f64_vec(), fc_before);
    // And what it loaded is PyTorch's backbone: with the file's fc the logits are torch's.
    load_safetensors_with(
        &model.fc,
        WEIGHTS.as_str(),
        &LoadOptions::new().prefix("fc"),
    )
    .unwrap();
    model.eval();
    let logits = model.forward(&input(&case, "x", DType::F32)).unwrap();
    assert_close("logits", &logits, &case["logits"], 1e-5);
}

/// A state that does not fit names every tensor that does not, not the first, with the
/// likely cause where the shapes tell it (a transposed matrix, as Hugging Face's GPT-2
/// stores its `Conv1D` weights), and loads nothing.
#[test]
fn every_tensor_that_does_not_fit_is_named_at_once() {
    let model = SmallResNet::new().unwrap();
    let before = model.state_dict().unwrap();
    let mut state = read_state(WEIGHTS.as_str()).unwrap();
    let mut altered = Vec::new();
    for (name, tensor) in state.iter_mut() {
        if name == "fc.weight" {
            *tensor = tensor.transpose(0, 1).unwrap().contiguous().unwrap();
            altered.push(name.clone());
        } else if name.ends_with("running_mean") && altered.len() < 13 {
            let n = tensor.numel();
            *tensor = tensor.reshape(&[1, n]).unwrap();
            altered.push(name.clone());
        }
    }
    assert!(altered.len() >= 3, "{altered:?}");
    let message = model.load_state_dict(&state).unwrap_err().to_string();
    assert!(
        message.contains(&format!(
            "{} of {} matched tensors do not fit",
            altered.len(),
            before.len()
        )),
        "{message}"
    );
    assert!(message.contains("`fc.weight` has shape [10, "), "{message}");
    assert!(message.contains("transposed"), "{message}");
    // Up to ten named, then a count of the rest.
    let named = altered
        .iter()
        .filter(|name| message.contains(&format!("`{name}`")))
        .count();
    assert_eq!(named, altered.len().min(10), "{message}");
    if altered.len() > 10 {
        assert!(
            message.contains(&format!("and {} more", altered.len() - 10)),
            "{message}"
        );
    }
    for ((name, a), (_, b)) in before.iter().zip(model.state_dict().unwrap().iter()) {
        assert_eq!(
            a.to_f64_vec(),
            b.to_f64_vec(),
            "{name} unchanged by a failed load"
        );
    }
}

#[test]
fn training_counts_batches_and_saves_the_counter_as_pytorch_does() {
    let case = fixture();
    let model = loaded_resnet();
    let before = model.bn1.num_batches_tracked.to_vec::<i64>().unwrap()[0];
    model.train();
    model.forward(&input(&case, "x", DType::F32)).unwrap();
    model.forward(&input(&case, "x", DType::F32)).unwrap();
    model.eval();
    model.forward(&input(&case, "x", DType::F32)).unwrap();
    assert_eq!(
        model.bn1.num_batches_tracked.to_vec::<i64>().unwrap(),
        vec![before + 2],
        "two training batches counted, the eval pass not"
    );
    let path = std::env::temp_dir().join(format!(
        "rumus-pytorch-weights-{}.safetensors",
        std::process::id()
    ));
    save_safetensors(&model, &path).unwrap();
    let saved = read_state(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let (_, count) = saved
        .iter()
        .find(|(name, _)| name == "layer2.0.downsample.1.num_batches_tracked")
        .unwrap();
    assert_eq!((count.dtype(), count.dims()), (DType::I64, &[][..]));
    assert_eq!(count.to_vec::<i64>().unwrap(), vec![before + 2]);
}

#[test]
fn to_dtype_converts_in_place_and_runs_in_f64() {
    let case = fixture();
    let mut model = loaded_resnet();
    let weight = model.fc.weight.clone();
    model.to_dtype(DType::F64).unwrap();
    assert!(
        model.named_tensors().iter().all(|(name, t)| t.dtype()
            == if name.ends_with("num_batches_tracked") {
                DType::I64
            } else {
                DType::F64
            }),
        "floating-point tensors are f64, the counters stay i64"
    );
    assert_eq!(
        weight.dtype(),
        DType::F64,
        "the same tensor, converted in place"
    );
    let logits = model.forward(&input(&case, "x", DType::F64)).unwrap();
    assert_eq!(logits.dtype(), DType::F64);
    assert_close("f64 logits", &logits, &case["logits"], 1e-5);

    // Back to f32, and a dtype that is not floating point is refused without a change.
    model.to_dtype(DType::F32).unwrap();
    let message = model.to_dtype(DType::I64).unwrap_err().to_string();
    assert!(message.contains("f16, f32 or f64"), "{message}");
    assert_eq!(model.fc.weight.dtype(), DType::F32);
    let logits = model.forward(&input(&case, "x", DType::F32)).unwrap();
    assert_close("f32 logits again", &logits, &case["logits"], 1e-5);
}

#[test]
fn max_pool2d_with_indices_matches_pytorch() {
    let case = fixture();
    let x = input(&case, "pool_in", DType::F32);
    let (values, indices) = x.max_pool2d_with_indices((3, 3), (2, 2), (1, 1)).unwrap();
    // A maximum is one of the inputs, so equal to torch's as f32 (the file has 9 digits).
    let as_f32 = |v: &[f64]| v.iter().map(|&v| v as f32).collect::<Vec<_>>();
    assert_eq!(values.dims(), case["pool_out"].dims.as_slice());
    assert_eq!(
        values.to_vec::<f32>().unwrap(),
        as_f32(&case["pool_out"].values)
    );
    assert_eq!(indices.dtype(), DType::I64);
    assert_close("indices", &indices, &case["pool_indices"], 0.0);
}

#[test]
fn on_the_gpu_the_same_weights_load_count_and_pool() {
    let Some(device) = common::gpu::gpu() else {
        return;
    };
    let case = fixture();
    let mut model = SmallResNet::new().unwrap();
    model.to_device(device.clone()).unwrap();
    // Loaded into GPU tensors, the i64 counters included.
    load_safetensors(&model, WEIGHTS.as_str()).unwrap();
    let before = model.bn1.num_batches_tracked.to_vec::<i64>().unwrap()[0];
    let x = input(&case, "x", DType::F32).to(&device).unwrap();
    model.eval();
    let logits = model.forward(&x).unwrap();
    assert_close("GPU logits", &logits, &case["logits"], 1e-4);
    model.train();
    model.forward(&x).unwrap();
    assert_eq!(
        model.bn1.num_batches_tracked.to_vec::<i64>().unwrap(),
        vec![before + 1]
    );
    assert!(model.bn1.num_batches_tracked.device().is_gpu());

    let pool_in = input(&case, "pool_in", DType::F32).to(&device).unwrap();
    let (values, indices) = pool_in
        .max_pool2d_with_indices((3, 3), (2, 2), (1, 1))
        .unwrap();
    assert!(indices.device().is_gpu());
    assert_close("GPU indices", &indices, &case["pool_indices"], 0.0);
    assert_close("GPU values", &values, &case["pool_out"], 1e-6);
}
