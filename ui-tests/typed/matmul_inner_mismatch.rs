use rumus::prelude::*;

fn main() {
    let x = Tensor::<(Dyn, D<784>)>::zeros_with_dims(&[2, 784]).unwrap();
    let w = Tensor::<(D<512>, D<10>)>::zeros();
    let _y = x.matmul(&w);
}
