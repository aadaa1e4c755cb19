use rumus::prelude::*;

tensor_fn! {
    fn pair(a: [B, 8], b: [B, 9]) -> [2, B, 8] {
        stack([a, b], 0)
    }
}

fn main() {}
