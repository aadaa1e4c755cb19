use rumus::prelude::*;

#[model]
struct Block {
    fc: Linear<64, 64>,
    ln: LayerNorm<64>,
}

#[model]
impl Block {
    tensor_fn! {
        fn forward(&self, x: [B, 64]) -> [B, 64] {
            let h = self.ln(self.fc(x));
            let h = relu(h);
            h + x
        }
    }
}

fn main() -> rumus::Result<()> {
    let x = Tensor::<(Dyn, D<64>)>::randn_with_dims(&[4, 64])?;
    assert_eq!(Block::new()?.forward(&x)?.dims(), &[4, 64]);
    Ok(())
}
