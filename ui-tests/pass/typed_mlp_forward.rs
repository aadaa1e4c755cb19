//! A typed two-layer forward pass with a runtime batch compiles and runs.
use rumus::prelude::*;

fn forward(
    x: &Tensor<(Dyn, D<4>)>,
    w1: &Tensor<(D<4>, D<8>)>,
    b1: &Tensor<(D<8>,)>,
    w2: &Tensor<(D<8>, D<2>)>,
) -> Tensor<(Dyn, D<2>)> {
    (&x.matmul(w1) + b1).relu().matmul(w2)
}

fn main() {
    let x = Tensor::<(Dyn, D<4>)>::from_vec(vec![0.5f32; 12]).unwrap();
    let y = forward(&x, &Tensor::ones(), &Tensor::zeros(), &Tensor::full(0.25));
    assert_eq!(y.dims(), &[3, 2]);
}
