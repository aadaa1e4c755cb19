use rumus::prelude::*;

tensor_fn! {
    fn join(a: [B, T, 8], b: [B, S, 8]) -> [B, T, 8] {
        cat([a, b], 1)
    }
}

fn main() {}
