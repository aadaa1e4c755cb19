use rumus::prelude::*;

rumus::dim!(Seq);

#[model]
struct Encoder {
    proj: Linear<16, 8>,
}

#[model]
impl Encoder {
    tensor_fn! {
        fn forward(&self, x: [B, Seq, 16]) -> [B, Seq, 8] {
            self.proj(x)
        }
    }
}

fn main() -> rumus::Result<()> {
    let encoder = Encoder::new()?;
    let x: Tensor<(Seq, Dyn, D<16>)> = DynTensor::ones(&[7, 2, 16], DType::F32)?.try_shape()?;
    let _encoded = encoder.forward(&x)?;
    Ok(())
}
