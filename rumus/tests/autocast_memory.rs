//! What an autocast product keeps for its backward pass: the `f16` copies of its operands,
//! not the `f32` operands, as PyTorch's autocast saves its casts. An activation that only
//! products read (a norm's output, an activation function's) is then freed when the forward
//! pass drops it. This file holds a single test because it reads a process-wide counter.

use rumus::amp::autocast;
use rumus::prelude::*;
use rumus::storage::live_storage_bytes;

fn values(dims: &[usize], seed: u64) -> DynTensor {
    let n: usize = dims.iter().product();
    let v: Vec<f32> = (0..n)
        .map(|i| ((i as u64 * 2_654_435_761 + seed) % 1000) as f32 / 1000.0 - 0.5)
        .collect();
    DynTensor::from_vec(v, dims).unwrap()
}

#[test]
fn an_activation_only_autocast_products_read_is_freed_with_its_last_handle() {
    let x = values(&[64, 256], 1).requires_grad_().unwrap();
    let w = values(&[256, 128], 2).requires_grad_().unwrap();
    let (scaled, loss) = {
        let _autocast = autocast();
        // Scaling by a constant keeps nothing for its own backward pass.
        let scaled = x.mul_scalar(2.0).unwrap();
        let loss = scaled.matmul(&w).unwrap().sum_all().unwrap();
        (scaled, loss)
    };
    let held = live_storage_bytes();
    drop(scaled);
    assert_eq!(
        held - live_storage_bytes(),
        64 * 256 * 4,
        "the product's f32 operand went with its last handle"
    );
    // The backward pass runs on the f16 copies: d loss / dx = 2 (1 @ w^T), with w rounded.
    let grads = loss.backward().unwrap();
    let w_half: Vec<f64> = w.detach().to_dtype(DType::F16).unwrap().to_f64_vec();
    let gx = grads.grad(&x).unwrap().to_f64_vec();
    for (i, g) in gx.iter().enumerate() {
        let row_sum: f64 = w_half[(i % 256) * 128..(i % 256 + 1) * 128].iter().sum();
        assert!(
            (g - 2.0 * row_sum).abs() <= 1e-3 * row_sum.abs().max(1.0),
            "{i}: {g}"
        );
    }
}
