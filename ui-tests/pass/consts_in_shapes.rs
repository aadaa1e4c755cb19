//! Named consts as dims: the macro cannot see their values, so equalities involving them are
//! checked by the compiler.
use rumus::prelude::*;

const HIDDEN: usize = 32;
const CLASSES: usize = 3;

#[model]
struct Head {
    fc1: Linear<8, HIDDEN>,
    fc2: Linear<HIDDEN, CLASSES>,
}

#[model]
impl Head {
    tensor_fn! {
        fn forward(&self, x: [B, 8]) -> [B, CLASSES] {
            self.fc2(self.fc1(x).gelu())
        }
    }
}

fn main() -> rumus::Result<()> {
    let head = Head::new()?;
    let y = head.forward(&Tensor::<(D<4>, D<8>)>::zeros())?;
    assert_eq!(y.dims(), &[4, CLASSES]);
    Ok(())
}
