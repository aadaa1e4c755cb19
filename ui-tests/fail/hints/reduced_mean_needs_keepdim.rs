use rumus::prelude::*;

tensor_fn! {
    fn normalised(x: [B, T, 64]) -> [B, T, 64] {
        x / x.mean(2)
    }
}

fn main() {}
