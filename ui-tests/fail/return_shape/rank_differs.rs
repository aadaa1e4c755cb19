use rumus::prelude::*;

tensor_fn! {
    fn pooled(x: [B, T, 64]) -> [B, T, 64] {
        x.mean(1)
    }
}

fn main() {}
