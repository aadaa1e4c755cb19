use rumus::nn::Embedding;
use rumus::prelude::*;

#[model]
struct Tagger {
    embed: Embedding<20, 16>,
    head: Linear<16, 3>,
}

#[model]
impl Tagger {
    tensor_fn! {
        fn forward(&self, ids: [B, T; i64]) -> [B, T, 3] {
            let embedded: [B, T, 16] = self.embed(ids);
            self.head(embedded)
        }
    }
}

fn main() -> rumus::Result<()> {
    let tagger = Tagger::new()?;
    let ids: Tensor<(Dyn, Dyn), i64> =
        DynTensor::from_vec(vec![1i64, 4, 19, 0, 7, 2], &[2, 3])?.try_typed()?;
    let tags = tagger.forward(&ids)?;
    assert_eq!(tags.dims(), &[2, 3, 3]);
    // The boundary checks the element type too.
    let floats = DynTensor::zeros(&[2, 3], DType::F32)?;
    assert!(floats.try_typed::<(Dyn, Dyn), i64>().is_err());
    Ok(())
}
