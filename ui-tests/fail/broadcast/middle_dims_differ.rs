use rumus::prelude::*;

tensor_fn! {
    fn scale(x: [B, 3, 8], s: [4, 1]) -> [B, 3, 8] {
        x * s
    }
}

fn main() {}
