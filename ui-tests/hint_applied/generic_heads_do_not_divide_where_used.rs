use rumus::nn::MultiheadAttention;
use rumus::prelude::*;

#[model]
struct Mixer<const HEADS: usize> {
    attn: MultiheadAttention<64, HEADS>,
}

fn main() -> rumus::Result<()> {
    let mixer = Mixer::<8>::new()?;
    assert_eq!(mixer.num_parameters(), 4 * 64 * 64 + 4 * 64);
    Ok(())
}
