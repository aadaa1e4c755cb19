use rumus::prelude::*;

tensor_fn! {
    fn pool(x: [B, T, 16]) -> [B, 16] {
        x.mean(1)
    }
}

fn main() -> rumus::Result<()> {
    let x = Tensor::<(Dyn, Dyn, D<16>)>::zeros_with_dims(&[2, 5, 16])?;
    assert_eq!(pool(&x)?.dims(), &[2, 16]);
    Ok(())
}
