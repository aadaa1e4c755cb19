use rumus::prelude::*;

tensor_fn! {
    fn join(a: [B, 8], b: [B, 2, 8]) -> [B, 10] {
        cat([a, b], 1)
    }
}

fn main() {}
