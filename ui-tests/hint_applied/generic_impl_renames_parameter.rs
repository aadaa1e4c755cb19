use rumus::prelude::*;

#[model]
struct Block<const C: usize> {
    fc: Linear<C, C>,
}

#[model]
impl<const C: usize> Block<C> {
    tensor_fn! {
        fn forward(&self, x: [B, C]) -> [B, C] {
            relu(self.fc(x))
        }
    }
}

fn main() -> rumus::Result<()> {
    let y = Block::<8>::new()?.forward(&Tensor::<(D<3>, D<8>)>::zeros())?;
    assert_eq!(y.dims(), &[3, 8]);
    Ok(())
}
