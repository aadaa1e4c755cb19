//! torchvision's ResNet-18 as generic `#[model]` structs (`model.rs`), loading
//! torchvision's weights strictly.
//!
//! ```text
//! pip install torch torchvision safetensors
//! python3 examples/resnet/export_torchvision.py resnet18.safetensors
//! cargo run --release --example resnet -- resnet18.safetensors
//! ```
//!
//! The export script also writes `resnet18.check.safetensors` (an input batch and
//! torchvision's logits for it); the example compares its own logits with those. Without a
//! path it builds the network with fresh weights and runs one batch.

mod model;

use std::process::ExitCode;

use model::ResNet18;
use rumus::io::{load_safetensors, read_state};
use rumus::prelude::*;

fn run(weights: Option<&str>) -> Result<(), Box<dyn std::error::Error>> {
    let model = ResNet18::new()?;
    println!("{model}");
    let Some(path) = weights else {
        model.eval();
        let x = Tensor::<(Dyn, D<3>, Dyn, Dyn)>::randn_with_dims(&[2, 3, 224, 224])?;
        println!("fresh weights: logits {:?}", model.forward(&x)?.dims());
        return Ok(());
    };
    load_safetensors(&model, path)?;
    model.eval();
    println!("loaded {path} strictly");
    let check = path.replace(".safetensors", ".check.safetensors");
    let Ok(state) = read_state(&check) else {
        println!("no {check}: nothing to compare with");
        return Ok(());
    };
    let tensor = |name: &str| {
        state
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
            .ok_or_else(|| format!("{check} has no `{name}`"))
    };
    let x: Tensor<(Dyn, D<3>, Dyn, Dyn)> = tensor("x")?.try_shape()?;
    let logits = model.forward(&x)?;
    let reference = tensor("logits")?.to_f64_vec();
    let largest = logits
        .as_dyn()
        .to_f64_vec()
        .iter()
        .zip(&reference)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    println!(
        "logits {:?}: largest difference from torchvision {largest:.2e}",
        logits.dims()
    );
    Ok(())
}

fn main() -> ExitCode {
    let path = std::env::args().nth(1);
    match run(path.as_deref()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
