use rumus::prelude::*;

tensor_fn! {
    fn apply(x: [B, 4]) -> [B, 4] {
        mystery(x)
    }
}

fn main() {}
