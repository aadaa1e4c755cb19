//! A tuple struct runs its fields in order; the second cannot take the first's output.
use rumus::prelude::*;

#[model]
struct Mlp(Linear<16, 8>, Linear<4, 2>);

fn main() -> rumus::Result<()> {
    let mlp = Mlp::new()?;
    let _y = mlp.forward(&Tensor::<(D<3>, D<16>)>::zeros())?;
    Ok(())
}
