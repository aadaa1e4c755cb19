use rumus::prelude::*;

tensor_fn! {
    fn head(x: [B, 64, 5, 5], w: [3136, 10]) -> [B, 10] {
        x.flatten(1) @ w
    }
}

fn main() {}
