use rumus::prelude::*;

tensor_fn! {
    fn double(x: Tensor) -> [B, 4] {
        x + x
    }
}

fn main() {}
