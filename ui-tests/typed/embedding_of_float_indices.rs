use rumus::nn::{Embedding, Forward};
use rumus::prelude::*;

fn main() -> rumus::Result<()> {
    let embed = Embedding::<20, 16>::new()?;
    let ids = Tensor::<(Dyn, Dyn)>::zeros_with_dims(&[2, 3])?;
    let _vectors = embed.forward_typed(&ids)?;
    Ok(())
}
