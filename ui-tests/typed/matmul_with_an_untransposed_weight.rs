//! A weight kept as PyTorch stores it, [out_features, in_features], multiplied directly.
use rumus::prelude::*;

fn main() {
    let x = Tensor::<(Dyn, D<784>)>::zeros_with_dims(&[2, 784]).unwrap();
    let w = Tensor::<(D<10>, D<784>)>::zeros();
    let _logits = x.matmul(&w);
}
