use rumus::prelude::*;

rumus::dim!(Batch);

tensor_fn! {
    fn select(x: [Batch, 8], y: [4, 8]) -> [Batch, 8] {
        x + y
    }
}

fn main() {}
