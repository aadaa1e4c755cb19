//! The head count is a parameter; the model is made with one that does not divide 64.
use rumus::nn::MultiheadAttention;
use rumus::prelude::*;

#[model]
struct Mixer<const HEADS: usize> {
    attn: MultiheadAttention<64, HEADS>,
}

fn main() -> rumus::Result<()> {
    let mixer = Mixer::<6>::new()?;
    println!("{mixer}");
    Ok(())
}
