//! The tour in README.md, kept compiling.
use rumus::prelude::*;

rumus::dim!(Batch); // a named runtime dim: only matches itself

fn main() -> rumus::Result<()> {
    let x: Tensor<(Batch, D<3>)> = DynTensor::zeros(&[2, 3], DType::F32)?.try_shape()?;
    let w = Tensor::<(D<3>, D<5>)>::randn().requires_grad_()?;
    let b = Tensor::<(D<5>,)>::zeros().requires_grad_()?;
    let loss = (&x.matmul(&w) + &b).tanh().mean_all();
    let grads = loss.backward()?;
    let dw: Tensor<(D<3>, D<5>)> = grads.grad_of(&w)?;
    println!("{:?}", dw);
    Ok(())
}
