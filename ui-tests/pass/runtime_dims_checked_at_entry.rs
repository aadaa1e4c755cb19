//! A runtime dim shared by two parameters is checked once, on entry, as a `Result`.
use rumus::prelude::*;

tensor_fn! {
    fn residual(x: [B, 8], skip: [B, 8]) -> [B, 8] {
        x + skip
    }
}

fn main() {
    let a = Tensor::<(Dyn, D<8>)>::zeros_with_dims(&[2, 8]).unwrap();
    let b = Tensor::<(Dyn, D<8>)>::zeros_with_dims(&[3, 8]).unwrap();
    let err = residual(&a, &b).unwrap_err().to_string();
    assert!(err.contains("`B`"), "{err}");
    assert!(residual(&a, &a).is_ok());
}
