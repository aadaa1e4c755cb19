use rumus::prelude::*;

#[model]
struct FeedForward {
    ff1: Linear<64, 256>,
    ff2: Linear<256, 64>,
    norm: LayerNorm<64>,
}

#[model]
impl FeedForward {
    tensor_fn! {
        fn forward(&self, x: [B, T, 64]) -> [B, T, 64] {
            let h = self.ff2(relu(self.ff1(x)));
            self.norm(h + x)
        }
    }
}

fn main() -> rumus::Result<()> {
    let x = Tensor::<(Dyn, Dyn, D<64>)>::randn_with_dims(&[2, 3, 64])?;
    assert_eq!(FeedForward::new()?.forward(&x)?.dims(), &[2, 3, 64]);
    Ok(())
}
