//! A sequential model: the chain is checked when the struct expands.
use rumus::prelude::*;

#[model(sequential, activation = relu)]
struct Mlp {
    l1: Linear<784, 256>,
    l2: Linear<256, 64>,
    l3: Linear<64, 10>,
}

fn main() -> rumus::Result<()> {
    let model = Mlp::new()?;
    let x = Tensor::<(Dyn, D<784>)>::zeros_with_dims(&[3, 784])?;
    assert_eq!(model.forward(&x)?.dims(), &[3, 10]);
    assert_eq!(model.num_parameters(), 784 * 256 + 256 + 256 * 64 + 64 + 64 * 10 + 10);
    Ok(())
}
