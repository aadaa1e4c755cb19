use rumus::prelude::*;

tensor_fn! {
    fn scaled(x: [B, 8]) -> [B, 8] {
        x @ 2.0
    }
}

fn main() {}
