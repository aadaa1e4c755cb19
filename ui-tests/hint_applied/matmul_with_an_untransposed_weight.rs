use rumus::prelude::*;

fn main() {
    let x = Tensor::<(Dyn, D<784>)>::zeros_with_dims(&[2, 784]).unwrap();
    let w = Tensor::<(D<10>, D<784>)>::zeros();
    let logits = x.matmul(&w.t());
    assert_eq!(logits.dims(), &[2, 10]);
}
