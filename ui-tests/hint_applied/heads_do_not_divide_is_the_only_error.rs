use rumus::nn::MultiheadAttention;
use rumus::prelude::*;

#[model]
struct Encoder {
    attn: MultiheadAttention<64, 8>,
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
    let x = Tensor::<(Dyn, Dyn, D<64>)>::randn_with_dims(&[2, 3, 64])?;
    assert_eq!(encoder.forward(&x)?.dims(), &[2, 3, 64]);
    Ok(())
}
