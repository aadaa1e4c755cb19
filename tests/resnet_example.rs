//! examples/resnet's generic `#[model]` ResNet at an eighth of ResNet-18's width takes the
//! state dict of the same network built by torchvision (tests/fixtures/
//! make_torchvision_resnet.py) strictly, and gives PyTorch's eval-mode logits; the full
//! ResNet-18 has torchvision's parameter count and names.

mod common;

#[path = "../examples/resnet/model.rs"]
mod model;

use common::fixture_file::{FixtureTensor, read_cases};
use model::{ResNet, ResNet18};
use rumus::io::load_safetensors;
use rumus::prelude::*;

type NarrowResNet18 = ResNet<8, 16, 32, 64, 10>;

fn fixture() -> std::collections::BTreeMap<String, FixtureTensor> {
    read_cases(include_str!("fixtures/narrow_resnet18.txt"))
        .remove(0)
        .1
}

fn weights() -> String {
    let root = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_string());
    format!("{root}/tests/fixtures/narrow_resnet18.safetensors")
}

#[test]
fn torchvision_weights_load_strictly_and_give_pytorch_logits() {
    let case = fixture();
    let model = NarrowResNet18::new().unwrap();
    // Strict: every name of the file is a parameter or buffer of the model, and back.
    load_safetensors(&model, weights()).unwrap();
    model.eval();
    assert_eq!(
        model.num_parameters() as f64,
        case["num_parameters"].values[0]
    );
    let x = Tensor::<(Dyn, D<3>, Dyn, Dyn)>::from_vec_with_dims(
        case["x"].values.iter().map(|&v| v as f32).collect(),
        &case["x"].dims,
    )
    .unwrap();
    let logits = model.forward(&x).unwrap();
    assert_eq!(logits.dims(), case["logits"].dims.as_slice());
    for (i, (a, e)) in logits
        .as_dyn()
        .to_f64_vec()
        .iter()
        .zip(&case["logits"].values)
        .enumerate()
    {
        assert!((a - e).abs() <= 1e-4, "logits[{i}]: rumus {a}, torch {e}");
    }
}

#[test]
fn resnet18_has_torchvisions_parameters_under_torchvisions_names() {
    let model = ResNet18::new().unwrap();
    // sum(p.numel() for p in torchvision.models.resnet18().parameters())
    assert_eq!(model.num_parameters(), 11_689_512);
    let names: Vec<String> = model
        .named_tensors()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    for expected in [
        "conv1.weight",
        "bn1.running_var",
        "layer1.1.conv2.weight",
        "layer2.0.downsample.0.weight",
        "layer4.0.downsample.1.num_batches_tracked",
        "layer4.1.bn2.bias",
        "fc.weight",
    ] {
        assert!(
            names.iter().any(|n| n == expected),
            "{expected} in {names:?}"
        );
    }
    // 62 parameters and 60 buffers, as torchvision's state_dict() has 122 entries.
    assert_eq!(names.len(), 122);
}
