//! Two layers of a generic model whose widths disagree whatever the parameter is.
use rumus::prelude::*;

#[model]
struct Mlp<const HIDDEN: usize> {
    fc1: Linear<16, HIDDEN>,
    fc2: Linear<32, 4>,
}

#[model]
impl<const HIDDEN: usize> Mlp<HIDDEN> {
    tensor_fn! {
        fn forward(&self, x: [B, 16]) -> [B, 4] {
            self.fc2(relu(self.fc1(x)))
        }
    }
}

fn main() -> rumus::Result<()> {
    Mlp::<64>::new()?.forward(&Tensor::<(D<2>, D<16>)>::zeros())?;
    Ok(())
}
