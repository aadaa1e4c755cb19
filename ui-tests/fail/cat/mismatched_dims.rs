use rumus::prelude::*;

tensor_fn! {
    fn join(a: [B, 3, 8], b: [B, 4, 6]) -> [B, 7, 8] {
        cat([a, b], 1)
    }
}

fn main() {}
