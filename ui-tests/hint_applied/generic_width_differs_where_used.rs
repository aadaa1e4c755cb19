use rumus::prelude::*;

#[model]
struct Head<const C: usize> {
    fc: Linear<C, 10>,
}

#[model]
impl<const C: usize> Head<C> {
    tensor_fn! {
        fn forward(&self, x: [B, 64]) -> [B, 10] {
            self.fc(x)
        }
    }
}

fn main() -> rumus::Result<()> {
    let head = Head::<64>::new()?;
    let y = head.forward(&Tensor::<(D<2>, D<64>)>::zeros())?;
    assert_eq!(y.dims(), &[2, 10]);
    Ok(())
}
