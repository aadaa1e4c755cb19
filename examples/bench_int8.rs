//! Int8 against f32 inference on the CPU, timed by `tests/bench/compare_int8.py` (which runs
//! PyTorch's f32 and dynamically quantized layers in the same run and prints ratios). Prints
//! one `name milliseconds` line per workload (median after warm-up) and the MNIST CNN's
//! weight bytes in each form. Thread count: `RAYON_NUM_THREADS`.
//!
//! ```text
//! cargo run --release --example bench_int8
//! ```

use rumus::nn::quantized::{QuantizedConv2d, QuantizedLinear};
use rumus::nn::{Linear, Module};
use rumus::prelude::*;

#[path = "common/median.rs"]
mod median;
use median::median_ms;

#[path = "mnist/model.rs"]
mod mnist_model;
use mnist_model::Cnn;

fn main() -> rumus::Result<()> {
    manual_seed(0);
    let _guard = rumus::no_grad();
    let layer = Linear::<1024, 1024>::new()?;
    let int8 = QuantizedLinear::from_linear(&layer)?;
    for batch in [1, 64] {
        let x = DynTensor::randn(&[batch, 1024], DType::F32)?;
        let reps = if batch == 1 { 2000 } else { 200 };
        let f32_ms = median_ms(20, reps, || {
            layer.forward_dyn(&x).unwrap();
        });
        let int8_ms = median_ms(20, reps, || {
            int8.forward(&x).unwrap();
        });
        println!("linear1024_b{batch}_f32 {f32_ms:.4}");
        println!("linear1024_b{batch}_int8 {int8_ms:.4}");
    }

    let model = Cnn::new()?;
    let quantized = (
        QuantizedConv2d::from_conv2d(&model.conv1)?,
        QuantizedConv2d::from_conv2d(&model.conv2)?,
        QuantizedLinear::from_linear(&model.fc1)?,
        QuantizedLinear::from_linear(&model.fc2)?,
    );
    let x = Tensor::<(Dyn, D<1>, D<28>, D<28>)>::randn_with_dims(&[64, 1, 28, 28])?;
    let pool = |h: DynTensor| h.relu()?.max_pool2d((2, 2), (2, 2), (0, 0));
    let int8_forward = |x: &DynTensor| -> rumus::Result<DynTensor> {
        let h = pool(quantized.0.forward(x)?)?;
        let h = pool(quantized.1.forward(&h)?)?;
        let h = quantized.2.forward(&h.flatten(1, -1)?)?.relu()?;
        quantized.3.forward(&h)
    };
    let f32_ms = median_ms(3, 30, || {
        model.forward(&x).unwrap();
    });
    let int8_ms = median_ms(3, 30, || {
        int8_forward(x.as_dyn()).unwrap();
    });
    println!("cnn_fwd_b64_f32 {f32_ms:.4}");
    println!("cnn_fwd_b64_int8 {int8_ms:.4}");
    let f32_bytes: usize = model.parameters().iter().map(|p| 4 * p.numel()).sum();
    let int8_bytes =
        quantized.0.bytes() + quantized.1.bytes() + quantized.2.bytes() + quantized.3.bytes();
    println!("cnn_weight_bytes_f32 {f32_bytes}");
    println!("cnn_weight_bytes_int8 {int8_bytes}");
    if std::env::args().any(|a| a == "gpu") {
        gpu_linear()?;
    }
    Ok(())
}

/// With `gpu`: a 4096 x 4096 layer on the GPU, f32 product against the int8 kernel, each
/// timed to completion (`synchronize`).
fn gpu_linear() -> rumus::Result<()> {
    let device = Device::gpu()?;
    let weight = DynTensor::randn(&[4096, 4096], DType::F32)?;
    let bias = DynTensor::randn(&[4096], DType::F32)?;
    let int8 = QuantizedLinear::new(&weight, Some(&bias))?.to(&device)?;
    let (weight, bias) = (weight.to(&device)?, bias.to(&device)?);
    for batch in [1, 64, 1024] {
        let x = DynTensor::randn(&[batch, 4096], DType::F32)?.to(&device)?;
        let f32_ms = median_ms(5, 50, || {
            x.linear(&weight, Some(&bias)).unwrap();
            device.synchronize().unwrap();
        });
        let int8_ms = median_ms(5, 50, || {
            int8.forward(&x).unwrap();
            device.synchronize().unwrap();
        });
        println!("gpu_linear4096_b{batch}_f32 {f32_ms:.4}");
        println!("gpu_linear4096_b{batch}_int8 {int8_ms:.4}");
    }
    Ok(())
}
