use rumus::prelude::*;

fn main() {
    let x = Tensor::<(D<2>, D<3>)>::zeros();
    let w = Tensor::<(D<3>, D<4>), f64>::zeros();
    let _y = x.matmul(&w);
}
