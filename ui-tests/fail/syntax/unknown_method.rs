use rumus::prelude::*;

tensor_fn! {
    fn normalise(x: [B, 4]) -> [B, 4] {
        x.frobnicate()
    }
}

fn main() {}
