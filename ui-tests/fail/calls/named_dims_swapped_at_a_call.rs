use rumus::prelude::*;

rumus::dim!(Batch);
rumus::dim!(Seq);

tensor_fn! {
    fn pool_sequence(x: [Batch, Seq, 16]) -> [Batch, 16] {
        x.mean(1)
    }
}

fn main() -> rumus::Result<()> {
    let x: Tensor<(Seq, Batch, D<16>)> = DynTensor::ones(&[7, 2, 16], DType::F32)?.try_shape()?;
    let _pooled = pool_sequence(&x)?;
    Ok(())
}
