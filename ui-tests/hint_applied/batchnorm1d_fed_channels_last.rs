use rumus::nn::BatchNorm1d;
use rumus::prelude::*;

#[model]
struct Block {
    norm: BatchNorm1d<64>,
}

#[model]
impl Block {
    tensor_fn! {
        fn forward(&self, x: [B, T, 64]) -> [B, 64, T] {
            self.norm(x.transpose(1, 2))
        }
    }
}

fn main() -> rumus::Result<()> {
    let x = Tensor::<(Dyn, Dyn, D<64>)>::randn_with_dims(&[3, 5, 64])?;
    assert_eq!(Block::new()?.forward(&x)?.dims(), &[3, 64, 5]);
    Ok(())
}
