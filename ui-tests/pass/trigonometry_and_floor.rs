//! `sin`, `cos` and `floor`, as methods and as free functions, keep their operand's shape.
use rumus::prelude::*;

tensor_fn! {
    fn waves(x: [B, 3, 4]) -> [B, 3, 4] {
        let s = x.sin() + cos(x);
        s.floor() + sin(x.cos()) + floor(x)
    }
}

fn main() -> rumus::Result<()> {
    let x = Tensor::<(Dyn, D<3>, D<4>)>::randn_with_dims(&[2, 3, 4])?;
    let y: Tensor<(Dyn, D<3>, D<4>)> = waves(&x)?;
    assert_eq!(y.dims(), &[2, 3, 4]);
    Ok(())
}
