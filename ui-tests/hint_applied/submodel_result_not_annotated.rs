use rumus::prelude::*;

#[model(sequential, activation = relu)]
struct Encoder {
    a: Linear<784, 256>,
    b: Linear<256, 64>,
}

#[model]
struct Classifier {
    encoder: Encoder,
    head: Linear<64, 10>,
}

#[model]
impl Classifier {
    tensor_fn! {
        fn forward(&self, x: [B, 784]) -> [B, 10] {
            let h: [B, _] = self.encoder(x);
            self.head(h)
        }
    }
}

fn main() -> rumus::Result<()> {
    let x = Tensor::<(Dyn, D<784>)>::randn_with_dims(&[2, 784])?;
    assert_eq!(Classifier::new()?.forward(&x)?.dims(), &[2, 10]);
    Ok(())
}
