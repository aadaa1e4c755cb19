use rumus::prelude::*;

#[model]
struct Tagger {
    #[conv(padding = 1)]
    conv: Conv1d<64, 128, 3>,
}

#[model]
impl Tagger {
    tensor_fn! {
        fn forward(&self, x: [B, T, 64]) -> [B, 128, T] {
            self.conv(x.transpose(1, 2))
        }
    }
}

fn main() -> rumus::Result<()> {
    let x = Tensor::<(Dyn, Dyn, D<64>)>::randn_with_dims(&[2, 7, 64])?;
    assert_eq!(Tagger::new()?.forward(&x)?.dims(), &[2, 128, 7]);
    Ok(())
}
