use rumus::prelude::*;

fn main() {
    let a = Tensor::<(D<2>, D<3>)>::zeros();
    let b = Tensor::<(D<3>, D<2>)>::zeros();
    let _c = &a + &b;
}
