//! Named runtime dims, the checked boundary, and static meets dynamic.
use rumus::prelude::*;

rumus::dim!(Batch);

fn main() -> rumus::Result<()> {
    let x: Tensor<(Batch, D<3>)> = DynTensor::zeros(&[2, 3], DType::F32)?.try_shape()?;
    let w = Tensor::<(D<3>, D<5>)>::randn();
    let y: Tensor<(Batch, D<5>)> = x.matmul(&w);
    let fixed: Tensor<(D<2>, D<5>)> = y.try_shape()?;
    assert_eq!(fixed.dims(), &[2, 5]);
    Ok(())
}
