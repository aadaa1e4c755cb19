//! Under autocast a tensor that several products read is rounded to `f16` once, and those
//! products keep one `f16` copy of it for their backward passes (self-attention projects one
//! input three times). One test, as it reads the process-wide storage counter.

use rumus::amp::autocast;
use rumus::storage::live_storage_bytes;
use rumus::{DType, DynTensor};

#[test]
fn products_reading_one_tensor_share_one_f16_copy_until_it_is_written() {
    let x = DynTensor::randn(&[256, 512], DType::F32).unwrap();
    let weights: Vec<DynTensor> = (0..3)
        .map(|_| {
            DynTensor::randn(&[512, 8], DType::F32)
                .unwrap()
                .requires_grad_()
                .unwrap()
        })
        .collect();
    let copy_bytes = 256 * 512 * 2;

    let before = live_storage_bytes();
    let products: Vec<DynTensor> = {
        let _autocast = autocast();
        weights.iter().map(|w| x.matmul(w).unwrap()).collect()
    };
    let held = live_storage_bytes() - before;
    assert!(
        held < 2 * copy_bytes,
        "three products of one input hold {held} bytes: more than one f16 copy of it"
    );

    // The same products of separate copies of the input (no sharing possible): same values
    // and the same gradients.
    let apart: Vec<DynTensor> = {
        let _autocast = autocast();
        weights
            .iter()
            .map(|w| x.mul_scalar(1.0).unwrap().matmul(w).unwrap())
            .collect()
    };
    for (shared, apart) in products.iter().zip(&apart) {
        assert_eq!(
            shared.to_vec::<f32>().unwrap(),
            apart.to_vec::<f32>().unwrap()
        );
    }
    let gradients = |ys: &[DynTensor]| {
        let loss = ys
            .iter()
            .map(|y| y.tanh().unwrap().sum_all().unwrap())
            .reduce(|a, b| a.add(&b).unwrap())
            .unwrap();
        let grads = loss.backward().unwrap();
        weights
            .iter()
            .map(|w| grads.grad(w).unwrap().to_vec::<f32>().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(gradients(&products), gradients(&apart));

    // An in-place write between two products: the second reads the new values.
    let _autocast = autocast();
    let first = x.matmul(&weights[0]).unwrap();
    x.mul_scalar_(2.0).unwrap();
    let second = x.matmul(&weights[0]).unwrap();
    for (a, b) in first
        .to_vec::<f32>()
        .unwrap()
        .iter()
        .zip(second.to_vec::<f32>().unwrap())
    {
        assert_eq!(2.0 * a, b, "the product read a copy made before the write");
    }
}
