//! Imported ONNX models on a GPU (`OnnxModel::to`): PyTorch's exports of tests/onnx_import.rs
//! (an MLP, CNNs, a U-Net with depthwise convolutions, a transformer, a GPT decoder from both
//! exporters) run on wgpu (lavapipe in CI) or, with `RUMUS_TEST_DEVICE=cuda`, on CUDA, and
//! give PyTorch's outputs; the shape arithmetic of those graphs mixes host tensors with the
//! device's on the way.

mod common;

use std::path::PathBuf;

use common::fixture_file::read_cases;
use rumus::onnx::OnnxModel;

fn fixture(name: &str) -> PathBuf {
    let root = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    PathBuf::from(root).join("tests/fixtures/onnx").join(name)
}

#[test]
fn pytorch_exports_run_on_the_gpu_with_pytorchs_outputs() {
    let Some(device) = common::gpu::gpu() else {
        return;
    };
    let text = std::fs::read_to_string(fixture("expected.txt")).unwrap();
    let cases = read_cases(&text);
    assert_eq!(cases.len(), 8);
    let mut failures = Vec::new();
    for (name, tensors) in cases {
        let model = OnnxModel::load(fixture(&format!("{name}.onnx")))
            .unwrap()
            .to(&device)
            .unwrap();
        let input = tensors["input"].to_tensor().to(&device).unwrap();
        let outputs = match model.run(&[&input]) {
            Ok(outputs) => outputs,
            Err(e) => {
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        assert_eq!(
            outputs[0].device(),
            device,
            "{name}: computed on the device"
        );
        let expected = &tensors["output"];
        assert_eq!(outputs[0].dims(), expected.dims.as_slice(), "{name}");
        // GPU products sum in another order than PyTorch's CPU ones.
        let got = outputs[0].to_f64_vec();
        if let Some((i, (a, e))) = got
            .iter()
            .zip(&expected.values)
            .enumerate()
            .find(|(_, (a, e))| (*a - *e).abs() > 1e-4 + 1e-3 * e.abs())
        {
            failures.push(format!("{name}[{i}]: rumus {a:e}, torch {e:e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
