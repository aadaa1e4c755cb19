use rumus::prelude::*;

fn main() {
    // Integer tensors hold indices and counts: float math on them is a compile error.
    let counts = Tensor::<(D<3>,), i64>::zeros();
    let _e = counts.exp();
}
