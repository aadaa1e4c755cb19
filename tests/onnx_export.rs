//! ONNX export checked by the real ONNX tools: each model is traced, written, passed through
//! `onnx.checker` (full check) and run by onnxruntime, whose output must equal rumus's
//! (`tests/onnx/check_model.py`). The Python side comes from the environment:
//! `RUMUS_ONNX_PYTHON` names a Python with `onnx` and `onnxruntime` (CI makes one in a
//! venv); without it these tests check only that the export succeeds, unless
//! `RUMUS_REQUIRE_ONNX` is set, which makes a missing Python a failure.

mod common;

#[path = "../examples/char_transformer/model.rs"]
#[allow(dead_code)]
mod char_model;
#[path = "../examples/digits/training.rs"]
#[allow(dead_code)]
mod digits;
#[path = "../examples/mnist/model.rs"]
mod mnist_model;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::resnet::SmallResNet;
use rumus::nn::{
    AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, Conv1d, ConvTranspose2d, Dropout, Embedding,
    Flatten, Gelu, GroupNorm, Gru, LayerNorm, Lstm, MaxPool2d, MultiheadAttention, Relu, RmsNorm,
    Sigmoid, Silu, Tanh,
};
use rumus::prelude::*;

/// The Python to run `check_model.py` with, or `None` to skip that part.
fn python() -> Option<PathBuf> {
    match std::env::var_os("RUMUS_ONNX_PYTHON") {
        Some(path) => Some(PathBuf::from(path)),
        None if std::env::var_os("RUMUS_REQUIRE_ONNX").is_some() => {
            panic!("RUMUS_REQUIRE_ONNX is set but RUMUS_ONNX_PYTHON is not")
        }
        None => {
            eprintln!("onnxruntime check skipped: RUMUS_ONNX_PYTHON is not set");
            None
        }
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rumus-onnx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Little-endian bytes of `t`'s elements (f32, f64 or i64).
fn raw(t: &DynTensor) -> (Vec<u8>, &'static str) {
    match t.dtype() {
        DType::F32 => (
            t.to_vec::<f32>()
                .unwrap()
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            "float32",
        ),
        DType::F64 => (
            t.to_vec::<f64>()
                .unwrap()
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            "float64",
        ),
        DType::I64 => (
            t.to_vec::<i64>()
                .unwrap()
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            "int64",
        ),
        other => panic!("no raw form for {other}"),
    }
}

/// Exports `forward` of `model` on `x` as `name.onnx`, then has onnxruntime run it.
fn check_export(
    name: &str,
    model: &dyn Module,
    x: &DynTensor,
    forward: impl Fn(&DynTensor) -> rumus::Result<DynTensor>,
) {
    let path = scratch(&format!("{name}.onnx"));
    rumus::onnx::export(model, x, &forward, &path).unwrap();
    check_runs(name, &path, x, &forward(x).unwrap());
}

/// Exports `forward` of `model` on `x` with `options`, then runs the file at each of
/// `inputs` (other sizes of the dynamic axes) in rumus's importer and onnxruntime.
fn check_dynamic_export(
    name: &str,
    model: &dyn Module,
    x: &DynTensor,
    forward: impl Fn(&DynTensor) -> rumus::Result<DynTensor>,
    options: &rumus::onnx::ExportOptions,
    inputs: &[DynTensor],
) {
    let path = scratch(&format!("{name}.onnx"));
    rumus::onnx::export_with(model, x, &forward, options, &path).unwrap();
    for (k, input) in inputs.iter().enumerate() {
        check_runs(
            &format!("{name}_{k}"),
            &path,
            input,
            &forward(input).unwrap(),
        );
    }
}

/// The file at `path` gives `expected` on `x`, in rumus's own importer (the same op set both
/// ways) and in onnxruntime.
fn check_runs(name: &str, path: &Path, x: &DynTensor, expected: &DynTensor) {
    let imported = rumus::onnx::OnnxModel::load(path)
        .and_then(|m| m.run(&[x]))
        .unwrap_or_else(|e| panic!("{name}: import: {e}"));
    assert_eq!(
        imported[0].dims(),
        expected.dims(),
        "{name}: imported shape"
    );
    for (a, b) in imported[0].to_f64_vec().iter().zip(expected.to_f64_vec()) {
        assert!(
            (a - b).abs() <= 1e-5 + 1e-5 * b.abs(),
            "{name}: imported {a}, rumus {b}"
        );
    }
    let Some(python) = python() else {
        return;
    };
    let (input, input_dtype) = raw(x);
    let (output, _) = raw(expected);
    let (input_path, output_path) = (
        scratch(&format!("{name}.input")),
        scratch(&format!("{name}.output")),
    );
    std::fs::write(&input_path, input).unwrap();
    std::fs::write(&output_path, output).unwrap();
    let dims = |t: &DynTensor| {
        let dims: Vec<String> = t.dims().iter().map(usize::to_string).collect();
        dims.join(",")
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/onnx/check_model.py");
    let result = Command::new(&python)
        .arg(script)
        .arg(path)
        .arg(&input_path)
        .arg(input_dtype)
        .arg(&output_path)
        .arg("1e-5")
        .arg(dims(x))
        .arg(dims(expected))
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", python.display()));
    assert!(
        result.status.success(),
        "{name}: {}{}",
        String::from_utf8_lossy(&result.stdout),
        String::from_utf8_lossy(&result.stderr)
    );
}

fn random(dims: &[usize], seed: u64) -> DynTensor {
    DynTensor::randn_with(
        dims,
        0.0,
        1.0,
        DType::F32,
        &mut rumus::rng::Generator::new(seed),
    )
    .unwrap()
}

#[test]
fn the_digits_mlp_exports() {
    manual_seed(1);
    let model = digits::Mlp::new().unwrap();
    check_export("digits_mlp", &model, &random(&[4, 64], 2), |x| {
        let x: Tensor<(Dyn, D<64>)> = x.clone().try_shape()?;
        Ok(model.forward(&x)?.as_dyn().clone())
    });
}

#[test]
fn the_mnist_cnn_exports() {
    manual_seed(3);
    let model = mnist_model::Cnn::new().unwrap();
    check_export("mnist_cnn", &model, &random(&[2, 1, 28, 28], 4), |x| {
        let x: Tensor<(Dyn, D<1>, D<28>, D<28>)> = x.clone().try_shape()?;
        Ok(model.forward(&x)?.as_dyn().clone())
    });
}

#[test]
fn a_resnet_with_batch_norm_exports_in_eval_mode() {
    manual_seed(5);
    let model = SmallResNet::new().unwrap();
    // Running statistics worth exporting: a few training batches first.
    for seed in 0..3 {
        model.forward(&random(&[8, 3, 16, 16], seed)).unwrap();
    }
    let x = random(&[2, 3, 16, 16], 6);
    let message = rumus::onnx::to_bytes(&model, &x, |x| model.forward(x))
        .unwrap_err()
        .to_string();
    assert!(message.contains("model.eval()"), "{message}");
    model.eval();
    check_export("resnet", &model, &x, |x| model.forward(x));
}

#[test]
fn the_char_transformer_exports() {
    manual_seed(7);
    let model = char_model::CharTransformer::new().unwrap();
    model.eval();
    let ids =
        DynTensor::from_vec((0..2 * 16).map(|i| (i * 7 % 60) as i64).collect(), &[2, 16]).unwrap();
    check_export("char_transformer", &model, &ids, |ids| model.forward(ids));
}

/// The layers the models above do not use, each in a small model of its own.
#[model]
struct Layers {
    conv1d: Conv1d<3, 4, 3>,
    deconv: ConvTranspose2d<4, 2, 3>,
    group_norm: GroupNorm<2, 4>,
    batch_norm: BatchNorm1d<4>,
    layer_norm: LayerNorm<6>,
    attention: MultiheadAttention<6, 2>,
    embedding: Embedding<10, 6>,
    gelu: Gelu,
    silu: Silu,
    tanh: Tanh,
    sigmoid: Sigmoid,
}

#[test]
fn convolutions_norms_and_pools_export() {
    manual_seed(8);
    let model = Layers::new().unwrap();
    model.eval();
    check_export("conv1d_batch_norm", &model, &random(&[2, 3, 9], 9), |x| {
        let h = model.conv1d.forward_dyn(x)?;
        model.batch_norm.forward_dyn(&h)?.tanh()
    });
    check_export(
        "deconv_group_norm",
        &model,
        &random(&[2, 4, 5, 5], 10),
        |x| {
            let h = model.group_norm.forward_dyn(x)?;
            let h = MaxPool2d::new(2).forward_dyn(&h.sigmoid()?)?;
            model
                .deconv
                .forward_dyn(&AvgPool2d::new(2).forward_dyn(&h)?)
        },
    );
}

#[test]
fn attention_embedding_and_activations_export() {
    manual_seed(11);
    let model = Layers::new().unwrap();
    model.eval();
    let x = random(&[2, 5, 6], 12);
    check_export("attention", &model, &x, |x| {
        let h = model.layer_norm.forward_dyn(x)?;
        let h = model.attention.forward_dyn(&h, &h, &h, None, true)?;
        model
            .silu
            .forward_dyn(&model.gelu.forward_dyn(&h)?)?
            .softmax(-1)
    });
    let ids = DynTensor::from_vec(vec![1i64, 9, 0, 4, 4, 2], &[2, 3]).unwrap();
    check_export("embedding", &model, &ids, |ids| {
        model.embedding.forward_dyn(ids)?.log_softmax(-1)
    });
}

#[test]
fn an_exported_gelu_runs_as_one_node() {
    // GELU is written as ONNX writes it before opset 20: Div, Erf, Add, Mul, Mul.
    let x = random(&[4, 300], 19);
    let path = scratch("gelu.onnx");
    let model = Layers::new().unwrap();
    rumus::onnx::export(&model, &x, |x| x.gelu(), &path).unwrap();
    let imported = rumus::onnx::OnnxModel::load(&path).unwrap();
    let described = format!("{imported:?}");
    assert!(described.contains("nodes: 1,"), "{described}");
    check_runs("gelu", &path, &x, &x.gelu().unwrap());
    // Against the definition in f64: the fused node keeps GELU's accuracy.
    let values = imported.run(&[&x]).unwrap()[0].to_f64_vec();
    for (v, x) in values.iter().zip(x.to_f64_vec()) {
        let exact = 0.5 * x * (1.0 + erf64(x / std::f64::consts::SQRT_2));
        assert!(
            (v - exact).abs() <= 1e-6 * (1.0 + exact.abs()),
            "gelu({x}) = {v}, not {exact}"
        );
    }
}

/// `erf` in f64 from its Maclaurin series (|x| below 4 here).
fn erf64(x: f64) -> f64 {
    let (mut term, mut sum) = (x, x);
    for n in 1..200 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * std::f64::consts::FRAC_2_SQRT_PI
}

/// The recurrent layers, RMSNorm and a bias-free convolution (the stateless layers are
/// made where they are used).
#[model]
struct MoreLayers {
    lstm: Lstm<4, 5>,
    gru: Gru<5, 3>,
    rms_norm: RmsNorm<3>,
    #[conv(bias = false)]
    conv: Conv2d<2, 3, 3>,
}

#[test]
fn recurrent_layers_rms_norm_and_views_export() {
    manual_seed(15);
    let model = MoreLayers::new().unwrap();
    model.eval();
    check_export("lstm_gru_rms_norm", &model, &random(&[2, 4, 4], 16), |x| {
        let (h, (_, c)) = model.lstm.forward_dyn(x, None)?;
        let (h, _) = model.gru.forward_dyn(&h, None)?;
        let c = c.sum(&[-1], false)?.unsqueeze(-1)?.transpose(0, 1)?;
        model.rms_norm.forward_dyn(&h)?.add(&c)
    });
    let (pool, flatten) = (AdaptiveAvgPool2d::new(2, 2), Flatten::new());
    let dropout = Dropout::new(0.3).unwrap();
    dropout.eval();
    check_export(
        "conv_pool_flatten_dropout",
        &model,
        &random(&[2, 2, 8, 8], 17),
        |x| {
            let h = Relu.forward_dyn(&model.conv.forward_dyn(x)?)?;
            let h = flatten.forward_dyn(&pool.forward_dyn(&h)?)?;
            dropout.forward_dyn(&h)
        },
    );
    // Sinusoids (positional encodings) and floor.
    check_export("sin_cos_floor", &model, &random(&[3, 4], 18), |x| {
        let angles = x.mul_scalar(4.0)?;
        angles
            .sin()?
            .add(&angles.cos()?)?
            .add(&x.mul_scalar(3.0)?.floor()?)
    });
}

#[test]
fn an_op_without_an_onnx_form_is_an_error_naming_it() {
    manual_seed(13);
    let model = Layers::new().unwrap();
    let x = random(&[2, 3, 9], 14);
    // `gather` has no export: its result reaches the graph from an untraced op.
    let indices = DynTensor::from_vec(vec![0i64; 6], &[2, 3, 1]).unwrap();
    let message = rumus::onnx::to_bytes(&model, &x, |x| {
        let first = x.gather(2, &indices)?;
        x.sub(&first)
    })
    .unwrap_err()
    .to_string();
    assert!(
        message.contains("without an ONNX export") && message.contains("[2, 3, 1]"),
        "{message}"
    );
}

#[test]
fn a_dynamic_batch_runs_at_other_batch_sizes() {
    use rumus::onnx::ExportOptions;
    let batch = ExportOptions::new().dynamic_axis(0, "batch");
    manual_seed(21);
    let mlp = digits::Mlp::new().unwrap();
    let mlp_forward = |x: &DynTensor| {
        let x: Tensor<(Dyn, D<64>)> = x.clone().try_shape()?;
        Ok(mlp.forward(&x)?.as_dyn().clone())
    };
    // Traced at batch 1, which the export raises to 2 and 3.
    let inputs = [
        random(&[3, 64], 22),
        random(&[1, 64], 23),
        random(&[7, 64], 24),
    ];
    check_dynamic_export(
        "dynamic_mlp",
        &mlp,
        &random(&[1, 64], 25),
        mlp_forward,
        &batch,
        &inputs,
    );

    let cnn = mnist_model::Cnn::new().unwrap();
    let cnn_forward = |x: &DynTensor| {
        let x: Tensor<(Dyn, D<1>, D<28>, D<28>)> = x.clone().try_shape()?;
        Ok(cnn.forward(&x)?.as_dyn().clone())
    };
    let inputs = [random(&[1, 1, 28, 28], 26), random(&[5, 1, 28, 28], 27)];
    check_dynamic_export(
        "dynamic_cnn",
        &cnn,
        &random(&[2, 1, 28, 28], 28),
        cnn_forward,
        &batch,
        &inputs,
    );

    let resnet = SmallResNet::new().unwrap();
    resnet.eval();
    let inputs = [random(&[1, 3, 16, 16], 29), random(&[4, 3, 16, 16], 30)];
    check_dynamic_export(
        "dynamic_resnet",
        &resnet,
        &random(&[2, 3, 16, 16], 31),
        |x| resnet.forward(x),
        &batch,
        &inputs,
    );
}

#[test]
fn a_transformer_runs_at_other_batch_sizes_and_lengths() {
    manual_seed(32);
    let model = char_model::CharTransformer::new().unwrap();
    model.eval();
    let ids = |b: usize, t: usize| {
        DynTensor::from_vec((0..b * t).map(|i| (i * 7 % 60) as i64).collect(), &[b, t]).unwrap()
    };
    let options = rumus::onnx::ExportOptions::new()
        .dynamic_axis(0, "batch")
        .dynamic_axis(1, "sequence");
    // Positions (`arange`), the causal mask and the heads' reshapes all follow the length.
    check_dynamic_export(
        "dynamic_char_transformer",
        &model,
        &ids(2, 16),
        |ids| model.forward(ids),
        &options,
        &[ids(1, 5), ids(3, 23), ids(2, 64)],
    );
}

#[test]
fn a_size_the_graph_cannot_compute_is_an_error_naming_it() {
    use rumus::onnx::{ExportOptions, to_bytes_with};
    manual_seed(33);
    let model = Layers::new().unwrap();
    model.eval();
    let x = random(&[2, 5, 6], 34);
    let sequence = ExportOptions::new().dynamic_axis(1, "sequence");
    // All positions but the last: `T - 1` is no product of sizes.
    let message = to_bytes_with(
        &model,
        &x,
        |x| x.narrow(1, 0, x.dims()[1] - 1)?.tanh(),
        &sequence,
    )
    .unwrap_err()
    .to_string();
    assert!(
        message.contains("Slice") && message.contains("\"sequence\"") && message.contains("static"),
        "{message}"
    );
    // An `if` on the size changes the ops.
    let message = to_bytes_with(
        &model,
        &x,
        |x| {
            if x.dims()[1] > 4 {
                x.tanh()
            } else {
                x.sigmoid()
            }
        },
        &sequence,
    )
    .unwrap_err()
    .to_string();
    assert!(
        message.contains("Tanh") && message.contains("Sigmoid"),
        "{message}"
    );
    let message = to_bytes_with(
        &model,
        &x,
        |x| x.tanh(),
        &ExportOptions::new().dynamic_axis(3, "width"),
    )
    .unwrap_err()
    .to_string();
    assert!(message.contains("rank 3"), "{message}");
}
