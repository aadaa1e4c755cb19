//! A model used as a layer of another: its shape comes from the annotation and is checked by
//! the type system through `Forward`.
use rumus::prelude::*;

#[model(sequential, activation = tanh)]
struct Encoder {
    a: Linear<16, 8>,
    b: Linear<8, 4>,
}

#[model]
struct Autoencoder {
    encoder: Encoder,
    decoder: Linear<4, 16>,
}

#[model]
impl Autoencoder {
    tensor_fn! {
        fn forward(&self, x: [B, 16]) -> [B, 16] {
            let code: [B, 4] = self.encoder(x);
            self.decoder(code)
        }
    }
}

fn main() -> rumus::Result<()> {
    let model = Autoencoder::new()?;
    let names: Vec<String> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "encoder.a.weight");
    let y = model.forward(&Tensor::<(D<2>, D<16>)>::zeros())?;
    assert_eq!(y.dims(), &[2, 16]);
    Ok(())
}
