//! Named runtime dims declared with `rumus::dim!` are types in the generated signature.
use rumus::prelude::*;

rumus::dim!(Batch);
rumus::dim!(Seq);

tensor_fn! {
    fn pool_sequence(x: [Batch, Seq, 16]) -> [Batch, 16] {
        x.mean(1)
    }
}

fn main() -> rumus::Result<()> {
    let x: Tensor<(Batch, Seq, D<16>)> = DynTensor::ones(&[2, 7, 16], DType::F32)?.try_shape()?;
    let y = pool_sequence(&x)?;
    assert_eq!(y.dims(), &[2, 16]);
    Ok(())
}
