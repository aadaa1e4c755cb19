//! ONNX import: models exported by PyTorch's `torch.onnx.export` (committed fixtures, from
//! tests/fixtures/make_onnx_imports.py) run in rumus with PyTorch's outputs, models exported
//! by rumus come back equal, integer arithmetic gives onnxruntime's values (a graph and its
//! outputs from tests/fixtures/make_onnx_integer_ops.py), one node of each imported op gives
//! onnxruntime's outputs (tests/fixtures/make_onnx_single_ops.py), and unsupported ops or
//! damaged files are errors, not panics.

mod common;
mod onnx_graphs;

use std::path::{Path, PathBuf};

use common::fixture_file::{assert_close, read_cases};
use onnx_graphs::{Attr, Graph};
use rumus::nn::{BatchNorm2d, Conv2d, Embedding, LayerNorm, Linear, Module};
use rumus::onnx::OnnxModel;
use rumus::prelude::*;
use rumus::rng::Generator;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/onnx")
        .join(name)
}

#[test]
fn pytorch_exports_run_with_pytorchs_outputs() {
    let text = std::fs::read_to_string(fixture("expected.txt")).unwrap();
    let cases = read_cases(&text);
    assert_eq!(cases.len(), 8);
    for (name, tensors) in cases {
        let model = OnnxModel::load(fixture(&format!("{name}.onnx"))).unwrap();
        assert_eq!(model.input_names(), ["input"], "{name}");
        assert_eq!(model.output_names(), ["output"], "{name}");
        // The fixtures' batch differs from the export's: the batch axis is dynamic.
        let input = tensors["input"].to_tensor();
        let outputs = model
            .run(&[&input])
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(outputs.len(), 1);
        assert_close(&name, "output", &outputs[0], &tensors["output"]);
    }
}

#[test]
fn pytorch_lstm_and_gru_layers_run_with_pytorchs_outputs() {
    // A two-layer bidirectional LSTM into a GRU: LSTM and GRU nodes with every output used
    // (`make_onnx_recurrent.py`), at a batch other than the export's.
    let text = std::fs::read_to_string(fixture("recurrent.txt")).unwrap();
    let cases = read_cases(&text);
    let (name, tensors) = cases.into_iter().next().unwrap();
    let model = OnnxModel::load(fixture("recurrent.onnx")).unwrap();
    let outputs = model.run(&[&tensors["input"].to_tensor()]).unwrap();
    assert_close(&name, "output", &outputs[0], &tensors["output"]);
}

#[test]
fn weights_keep_their_pytorch_names() {
    let model = OnnxModel::load(fixture("mlp.onnx")).unwrap();
    let names: Vec<&str> = model
        .initializers()
        .iter()
        .map(|(n, _)| n.as_str())
        .collect();
    assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
    assert_eq!(model.initializers()[0].1.dims(), &[32, 64]);
    assert_eq!(model.opset(), 17);
}

#[test]
fn an_unsupported_op_is_named_when_the_file_is_loaded() {
    let refused = OnnxModel::load(fixture("unsupported.onnx")).unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("cannot run these ONNX ops: Det"),
        "{message}"
    );
    assert!(message.contains("unsupported.onnx"), "{message}");
}

#[test]
fn inputs_that_do_not_fit_are_errors() {
    let model = OnnxModel::load(fixture("mlp.onnx")).unwrap();
    let wrong = DynTensor::zeros(&[2, 63], DType::F32).unwrap();
    let refused = model.run(&[&wrong]).unwrap_err();
    assert!(refused.to_string().contains("[?, 64]"), "{refused}");
    let right = DynTensor::zeros(&[2, 64], DType::F32).unwrap();
    let refused = model.run(&[&right, &right]).unwrap_err();
    assert!(refused.to_string().contains("takes 1 inputs"), "{refused}");
    let missing = OnnxModel::load(fixture("no_such_model.onnx")).unwrap_err();
    assert!(missing.to_string().contains("cannot read"), "{missing}");
}

/// Every truncation and many single-byte changes of a real file load as a model or fail
/// with an error; none panics or allocates without bound.
#[test]
fn damaged_files_are_errors_not_panics() {
    let bytes = std::fs::read(fixture("cnn.onnx")).unwrap();
    let input = DynTensor::zeros(&[1, 1, 8, 8], DType::F32).unwrap();
    let try_bytes = |damaged: &[u8]| {
        if let Ok(model) = OnnxModel::from_bytes(damaged, "damaged.onnx") {
            let _ = model.run(&[&input]);
        }
    };
    for len in (0..bytes.len()).step_by(7) {
        try_bytes(&bytes[..len]);
    }
    let mut rng = Generator::new(5);
    for _ in 0..300 {
        let mut damaged = bytes.clone();
        let at = (rng.next_u64() as usize) % damaged.len();
        damaged[at] = rng.next_u64() as u8;
        try_bytes(&damaged);
    }
    let refused = OnnxModel::from_bytes(&bytes[..bytes.len() / 2], "half.onnx").unwrap_err();
    assert!(refused.to_string().contains("half.onnx"), "{refused}");
}

#[model]
struct Exported {
    conv: Conv2d<1, 4, 3>,
    bn: BatchNorm2d<4>,
    fc: Linear<16, 6>,
    embed: Embedding<10, 6>,
    norm: LayerNorm<6>,
}

type Forward<'a> = dyn Fn(&DynTensor) -> rumus::Result<DynTensor> + 'a;

/// A model exported by rumus runs the same through the importer (the export's op set).
#[test]
fn rumus_exports_come_back_equal() {
    manual_seed(3);
    let model = Exported::new().unwrap();
    model
        .bn
        .running_mean
        .copy_(&common::gpu::tensor(&[4], 1).mul_scalar(0.3).unwrap())
        .unwrap();
    model.eval();
    let cases: Vec<(DynTensor, Box<Forward>)> = vec![
        (
            common::gpu::tensor(&[2, 1, 6, 6], 2),
            Box::new(|x: &DynTensor| {
                let h = model.bn.forward_dyn(&model.conv.forward_dyn(x)?)?.relu()?;
                let h = h.max_pool2d((2, 2), (2, 2), (0, 0))?.flatten(1, -1)?;
                model
                    .fc
                    .forward_dyn(&h.narrow(1, 0, 16)?)?
                    .gelu()?
                    .softmax(-1)
            }),
        ),
        (
            DynTensor::from_vec(vec![1i64, 4, 9, 0, 3, 3], &[2, 3]).unwrap(),
            Box::new(|ids: &DynTensor| {
                let h = model.norm.forward_dyn(&model.embed.forward_dyn(ids)?)?;
                h.transpose(1, 2)?.mean(&[-1], false)?.tanh()
            }),
        ),
    ];
    for (k, (input, forward)) in cases.iter().enumerate() {
        let expected = forward(input).unwrap();
        let bytes = rumus::onnx::to_bytes(&model, input, |x| forward(x)).unwrap();
        let imported = OnnxModel::from_bytes(&bytes, "roundtrip.onnx").unwrap();
        let got = imported.run(&[input]).unwrap();
        assert_eq!(got[0].dims(), expected.dims(), "case {k}");
        for (a, b) in got[0].to_f64_vec().iter().zip(expected.to_f64_vec()) {
            assert!(
                (a - b).abs() <= 1e-6 + 1e-5 * b.abs(),
                "case {k}: {a} against {b}"
            );
        }
    }
}

/// A fixture tensor as the dtype it was written in.
fn tensor_of(t: &common::fixture_file::FixtureTensor) -> DynTensor {
    match t.dtype.as_str() {
        "f32" => DynTensor::from_vec(t.values.iter().map(|&v| v as f32).collect(), &t.dims),
        "i64" => DynTensor::from_vec(t.values.iter().map(|&v| v as i64).collect(), &t.dims),
        "bool" => DynTensor::from_vec(t.values.iter().map(|&v| v != 0.0).collect(), &t.dims),
        other => panic!("fixture dtype {other}"),
    }
    .unwrap()
}

/// One node of each imported op, over the attributes and edge cases that decide what it
/// computes (negative axes, clamped slice bounds, steps of either sign, padding counted or
/// not, broadcasting, keepdims, empty axes, ...), against onnxruntime's outputs
/// (tests/fixtures/make_onnx_single_ops.py). Every failing graph is listed.
#[test]
fn single_ops_match_onnxruntime() {
    let text = std::fs::read_to_string(fixture("single_ops.txt")).unwrap();
    let cases = read_cases(&text);
    assert_eq!(cases.len(), 208);
    let mut failures = Vec::new();
    for (name, tensors) in &cases {
        let model = OnnxModel::load(fixture(&format!("single_ops/{name}.onnx"))).unwrap();
        let listed = |prefix: &str| -> Vec<DynTensor> {
            (0..)
                .map_while(|k| tensors.get(&format!("{prefix}{k}")))
                .map(tensor_of)
                .collect()
        };
        let inputs = listed("in");
        let outputs = match model.run(&inputs.iter().collect::<Vec<_>>()) {
            Ok(outputs) => outputs,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let expected = listed("out");
        if outputs.len() != expected.len() {
            failures.push(format!(
                "{name}: {} outputs, onnxruntime {}",
                outputs.len(),
                expected.len()
            ));
        }
        for (k, (got, want)) in outputs.iter().zip(expected).enumerate() {
            if got.dims() != want.dims() || got.dtype() != want.dtype() {
                failures.push(format!(
                    "{name} out{k}: {:?} {:?}, onnxruntime {:?} {:?}",
                    got.dtype(),
                    got.dims(),
                    want.dtype(),
                    want.dims()
                ));
                continue;
            }
            let values = got.to_f64_vec().into_iter().zip(want.to_f64_vec());
            if let Some((i, (g, w))) = values.enumerate().find(|(_, (g, w))| {
                !(g.is_nan() && w.is_nan()) && (g - w).abs() > 1e-5 + 1e-4 * w.abs()
            }) {
                failures.push(format!("{name} out{k}[{i}]: {g}, onnxruntime {w}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Integer arithmetic (the shape computations exported graphs carry) as onnxruntime does it:
/// `Div` truncates toward zero (-7 / 2 is -3, not the floor's -4).
#[test]
fn integer_arithmetic_matches_onnxruntime() {
    let text = std::fs::read_to_string(fixture("integer_ops.txt")).unwrap();
    let values: std::collections::HashMap<&str, Vec<i64>> = text
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| {
            let mut words = line.split_whitespace();
            let name = words.next().unwrap();
            (name, words.map(|w| w.parse().unwrap()).collect())
        })
        .collect();
    let model = OnnxModel::load(fixture("integer_ops.onnx")).unwrap();
    let input = |name: &str| DynTensor::from_vec(values[name].clone(), &[6]).unwrap();
    let outputs = model.run(&[&input("a"), &input("b")]).unwrap();
    assert_eq!(model.output_names(), ["add", "sub", "mul", "div"]);
    assert_eq!(outputs.len(), 4);
    for (name, output) in model.output_names().into_iter().zip(&outputs) {
        assert_eq!(output.to_vec::<i64>().unwrap(), values[name], "{name}");
    }
}

/// The error of loading `graph`.
fn load_error(graph: &Graph) -> String {
    match OnnxModel::from_bytes(&graph.bytes(), "checked.onnx") {
        Ok(_) => panic!("the model loaded"),
        Err(e) => e.to_string(),
    }
}

fn assert_names(message: &str, parts: &[&str]) {
    for part in parts {
        assert!(message.contains(part), "{part:?} not in: {message}");
    }
}

/// What the file fixes (the rank of a graph input, the type of an initializer, an
/// attribute) and no run could change is an error when the model is loaded, naming the node
/// and what is wrong, not at the first run.
#[test]
fn nodes_that_cannot_run_are_refused_at_load_by_name() {
    let mut g = Graph::new(17);
    g.input("x", &[1, 1, 2, 3, 3])
        .floats("w", &[1, 1, 1, 1, 1], &[1.0])
        .node("Conv", &["x", "w"], &["y"], &[])
        .output("y");
    assert_names(
        &load_error(&g),
        &["checked.onnx", "\"Conv_y\"", "rank-5 input"],
    );

    let mut g = Graph::new(17);
    g.input("x", &[1, 2, 6])
        .floats("w", &[1, 2, 3, 3], &[0.0; 18])
        .node("Conv", &["x", "w"], &["y"], &[])
        .output("y");
    assert_names(
        &load_error(&g),
        &["\"Conv_y\"", "rank-3 input by a rank-4 weight"],
    );

    // Recurrent layers beyond what PyTorch exports are refused by name when loading.
    let recurrent = |op: &str, attrs: &[Attr]| {
        let mut g = Graph::new(17);
        g.input("x", &[2, 1, 3])
            .floats("w", &[1, 12, 3], &[0.0; 36])
            .floats("r", &[1, 12, 4], &[0.0; 48])
            .node(op, &["x", "w", "r"], &["y"], attrs)
            .output("y");
        load_error(&g)
    };
    let refused = recurrent(
        "LSTM",
        &[Attr::Int("hidden_size", 3), Attr::Int("layout", 1)],
    );
    assert_names(&refused, &["\"LSTM_y\"", "layout=1"]);
    let refused = recurrent("GRU", &[Attr::Int("hidden_size", 4)]);
    assert_names(&refused, &["\"GRU_y\"", "linear_before_reset=0"]);
    assert_names(&recurrent("LSTM", &[]), &["positive hidden_size"]);

    let pool = |attrs: &[Attr]| {
        let mut g = Graph::new(17);
        g.input("x", &[1, 2, 6])
            .node("MaxPool", &["x"], &["y"], attrs)
            .output("y");
        load_error(&g)
    };
    let kernel = Attr::Ints("kernel_shape", &[2]);
    let refused = pool(&[Attr::Ints("kernel_shape", &[2]), Attr::Int("ceil_mode", 2)]);
    assert_names(&refused, &["\"MaxPool_y\"", "attribute ceil_mode = 2"]);
    let refused = pool(&[kernel, Attr::Ints("strides", &[0])]);
    assert_names(&refused, &["attribute strides [0]", "1 positive values"]);
    // A 2-D kernel over a 1-D input
    let refused = pool(&[Attr::Ints("kernel_shape", &[2, 2])]);
    assert_names(&refused, &["attribute kernel_shape [2, 2]"]);
    assert_names(&pool(&[]), &["attribute kernel_shape is required"]);

    // A window past the padded input, found at the run (loading checks ranks, not sizes).
    let mut g = Graph::new(17);
    g.input("x", &[1, 1, 2])
        .node(
            "MaxPool",
            &["x"],
            &["y"],
            &[Attr::Ints("kernel_shape", &[4]), Attr::Int("ceil_mode", 1)],
        )
        .output("y");
    let model = OnnxModel::from_bytes(&g.bytes(), "short.onnx").unwrap();
    let x = DynTensor::zeros(&[1, 1, 2], DType::F32).unwrap();
    let refused = model.run(&[&x]).unwrap_err().to_string();
    assert_names(&refused, &["\"MaxPool_y\"", "larger than the padded input"]);

    let mut g = Graph::new(17);
    g.floats("f", &[2], &[1.0, 0.0])
        .node("And", &["f", "f"], &["y"], &[])
        .output("y");
    assert_names(
        &load_error(&g),
        &["\"And_y\"", "And of f32", "bool tensors only"],
    );

    let mut g = Graph::new(17);
    g.input("x", &[3])
        .node("IsInf", &["x"], &["y"], &[Attr::Int("detect_positive", 2)])
        .output("y");
    assert_names(
        &load_error(&g),
        &["\"IsInf_y\"", "attribute detect_positive = 2"],
    );

    let mut g = Graph::new(17);
    g.input("x", &[2, 3])
        .ints("i", &[0])
        .node(
            "GatherElements",
            &["x", "i"],
            &["y"],
            &[Attr::Int("axis", 2)],
        )
        .output("y");
    assert_names(
        &load_error(&g),
        &["\"GatherElements_y\"", "attribute axis = 2 is out of range"],
    );

    let mut g = Graph::new(17);
    g.input("x", &[2, 3])
        .ints("i", &[0])
        .node(
            "GatherND",
            &["x", "i"],
            &["y"],
            &[Attr::Int("batch_dims", 1)],
        )
        .output("y");
    assert_names(
        &load_error(&g),
        &["\"GatherND_y\"", "attribute batch_dims = 1"],
    );

    let mut g = Graph::new(17);
    g.input("x", &[3])
        .node("IsNaN", &["x"], &["y"], &[Attr::Str("detect", "all")])
        .node("Not", &["y"], &["z"], &[])
        .output("z");
    OnnxModel::from_bytes(&g.bytes(), "fine.onnx").expect("IsNaN then Not of a float input");
}

/// An index outside its axis is an error naming it and where it stands among the indices,
/// for both ends of ONNX's range [-size, size).
#[test]
fn gather_indices_out_of_range_are_errors_naming_them() {
    let x = DynTensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    let run = |op: &str, indices: &[i64]| {
        let mut g = Graph::new(17);
        g.input("x", &[3])
            .ints("i", indices)
            .node(op, &["x", "i"], &["y"], &[])
            .output("y");
        let model = OnnxModel::from_bytes(&g.bytes(), "gather.onnx").unwrap();
        model.run(&[&x])
    };
    let picked = run("GatherElements", &[-3, 2, -1]).unwrap();
    assert_eq!(picked[0].to_vec::<f32>().unwrap(), [1.0, 3.0, 3.0]);
    let refused = run("GatherElements", &[0, 3]).unwrap_err().to_string();
    assert_names(
        &refused,
        &[
            "\"GatherElements_y\"",
            "index 3 (element 1 of the indices)",
            "size 3",
        ],
    );
    let refused = run("GatherElements", &[-4]).unwrap_err().to_string();
    assert_names(&refused, &["index -4 (element 0", "[-3, 3)"]);
    // GatherND by one index tuple [k] of k = 1 value: data[k], a scalar.
    assert_eq!(
        run("GatherND", &[-2]).unwrap()[0].to_vec::<f32>().unwrap(),
        [2.0]
    );
    let refused = run("GatherND", &[3]).unwrap_err().to_string();
    assert_names(&refused, &["\"GatherND_y\"", "index 3 (element 0"]);
}

/// Scatters refuse what would write outside the data or leave the result undefined (two
/// updates of one element under reduction `none`); the reductions rumus lacks and the Einsum
/// forms it lacks are refused when the file is loaded, naming the node and the fix.
#[test]
fn scatters_and_einsums_that_cannot_run_are_errors_naming_them() {
    let x = DynTensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    let scatter = |op: &str, indices: &[i64], attrs: &[Attr]| -> rumus::Result<Vec<DynTensor>> {
        let mut g = Graph::new(18);
        let updates = vec![10.0; indices.len()];
        g.input("x", &[3])
            .ints("i", indices)
            .floats("u", &[indices.len()], &updates);
        g.node(op, &["x", "i", "u"], &["y"], attrs).output("y");
        let model = OnnxModel::from_bytes(&g.bytes(), "scatter.onnx")?;
        model.run(&[&x])
    };
    let replaced = scatter("ScatterElements", &[-1, 0], &[]).unwrap();
    assert_eq!(replaced[0].to_vec::<f32>().unwrap(), [10.0, 2.0, 10.0]);
    let added = scatter(
        "ScatterElements",
        &[2, -1],
        &[Attr::Str("reduction", "add")],
    )
    .unwrap();
    assert_eq!(added[0].to_vec::<f32>().unwrap(), [1.0, 2.0, 23.0]);
    let twice = scatter("ScatterElements", &[1, -2], &[])
        .unwrap_err()
        .to_string();
    assert_names(
        &twice,
        &[
            "\"ScatterElements_y\"",
            "updates 0 and 1 write the same element",
            "\"add\"",
        ],
    );
    // Indices of another rank than the data's name no element of it.
    let mut g = Graph::new(18);
    g.input("x", &[3])
        .ints("i", &[0])
        .floats("u", &[1], &[1.0])
        .node("Unsqueeze", &["i", "i"], &["i2"], &[])
        .node("Unsqueeze", &["u", "i"], &["u2"], &[])
        .node("ScatterElements", &["x", "i2", "u2"], &["y"], &[])
        .output("y");
    let ranked = OnnxModel::from_bytes(&g.bytes(), "scatter.onnx")
        .unwrap()
        .run(&[&x])
        .unwrap_err()
        .to_string();
    assert_names(&ranked, &["indices [1, 1]", "the data's rank"]);
    let outside = scatter("ScatterElements", &[3], &[])
        .unwrap_err()
        .to_string();
    assert_names(&outside, &["index 3 (element 0 of the indices)", "size 3"]);
    let multiplied = scatter("ScatterElements", &[0], &[Attr::Str("reduction", "mul")])
        .unwrap_err()
        .to_string();
    assert_names(
        &multiplied,
        &["scatter.onnx", "reduction = \"mul\" is not supported"],
    );

    let einsum = |equation: &'static str, operands: usize| {
        let mut g = Graph::new(17);
        g.input("a", &[3, 3])
            .input("b", &[3, 3])
            .input("c", &[3, 3]);
        let inputs = &["a", "b", "c"][..operands];
        g.node("Einsum", inputs, &["y"], &[Attr::Str("equation", equation)])
            .output("y");
        load_error(&g)
    };
    assert_names(
        &einsum("ii->i", 1),
        &["\"Einsum_y\"", "a letter repeated within one term"],
    );
    assert_names(&einsum("ij,jk,kl->il", 3), &["3 operands"]);
    assert_names(&einsum("ij,jk->ik", 1), &["2 terms for 1 operands"]);
    assert_names(
        &einsum("ij,jk->iz", 2),
        &["the output's letter z is in no operand"],
    );
}

/// `Range` counts its length before making it: one past memory (from a file of a few
/// bytes) is refused, and so is a delta of 0, which never reaches its limit.
#[test]
fn ranges_past_memory_or_without_a_step_are_refused() {
    let run = |start: i64, limit: i64, delta: i64| {
        let mut g = Graph::new(17);
        g.ints("s", &[start])
            .ints("l", &[limit])
            .ints("d", &[delta])
            .node("Range", &["s", "l", "d"], &["y"], &[])
            .output("y");
        let model = OnnxModel::from_bytes(&g.bytes(), "range.onnx").unwrap();
        model.run(&[])
    };
    let down = run(i64::MAX, i64::MIN, -(1 << 62)).unwrap();
    assert_eq!(
        down[0].to_vec::<i64>().unwrap(),
        // 2^63 - 1 down by 2^62 while above -2^63: four values, no overflow on the way
        [i64::MAX, (1 << 62) - 1, -1, -(1 << 62) - 1]
    );
    let refused = run(i64::MIN, i64::MAX, 1).unwrap_err().to_string();
    assert_names(&refused, &["\"Range_y\"", "Range"]);
    let refused = run(0, 5, 0).unwrap_err().to_string();
    assert_names(&refused, &["\"Range_y\"", "delta of 0"]);
}

/// A BERT-style encoder exported by PyTorch with an attention mask built as `transformers`
/// builds it (And, IsNaN, IsInf, GatherElements, an int64 Abs and Clip, a Conv1d, Range), by
/// either exporter, run on a batch of another size and length than the export's, padded by
/// the mask and by pad ids, gives PyTorch's logits (tests/fixtures/make_onnx_bert.py)
/// within 1e-4 relative (1e-6 absolute near 0).
#[test]
fn a_bert_style_export_with_an_attention_mask_gives_pytorchs_logits() {
    let text = std::fs::read_to_string(fixture("bert_masked.txt")).unwrap();
    let cases = read_cases(&text);
    let (_, tensors) = &cases[0];
    let (ids, mask) = (
        tensors["input_ids"].to_tensor(),
        tensors["attention_mask"].to_tensor(),
    );
    let expected = &tensors["logits"];
    for file in ["bert_masked.onnx", "bert_masked_dynamo.onnx"] {
        let model = OnnxModel::load(fixture(file)).unwrap();
        assert_eq!(
            model.input_names(),
            ["input_ids", "attention_mask"],
            "{file}"
        );
        let logits = model
            .run(&[&ids, &mask])
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(logits[0].dims(), expected.dims.as_slice(), "{file}");
        for (got, want) in logits[0].to_f64_vec().iter().zip(&expected.values) {
            assert!(
                (got - want).abs() <= 1e-6 + 1e-4 * want.abs(),
                "{file}: {got} against PyTorch's {want}"
            );
        }
    }
}
