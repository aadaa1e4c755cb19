use rumus::prelude::*;

tensor_fn! {
    fn scaled(x: [B, 10], s: [B]) -> [B, 10] {
        x * s
    }
}

fn main() {}
