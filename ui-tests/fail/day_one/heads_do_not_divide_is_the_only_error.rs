//! A head count that does not divide the width: that error alone, not also one on every
//! use of the model's `new()`.
use rumus::prelude::*;
use rumus::nn::MultiheadAttention;

#[model]
struct Encoder {
    attn: MultiheadAttention<64, 6>,
}

#[model]
impl Encoder {
    tensor_fn! {
        fn forward(&self, x: [B, T, 64]) -> [B, T, 64] {
            self.attn(x)
        }
    }
}

fn main() -> rumus::Result<()> {
    let encoder = Encoder::new()?;
    println!("{}", encoder.num_parameters());
    Ok(())
}
