use rumus::prelude::*;

#[model]
struct Block {
    ff1: Linear<64, 256>,
    ff2: Linear<256, 64>,
    #[dropout(p = 0.1)]
    drop: Dropout,
}

#[model]
impl Block {
    tensor_fn! {
        fn forward(&self, x: [B, 64]) -> [B, 64] {
            x + self.drop(self.ff2(gelu(self.ff1(x))))
        }
    }
}

fn main() -> rumus::Result<()> {
    let x = Tensor::<(Dyn, D<64>)>::randn_with_dims(&[4, 64])?;
    assert_eq!(Block::new()?.forward(&x)?.dims(), &[4, 64]);
    Ok(())
}
