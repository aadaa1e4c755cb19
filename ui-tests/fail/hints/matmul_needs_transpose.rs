use rumus::prelude::*;

tensor_fn! {
    fn logits(x: [B, 784], w: [10, 784]) -> [B, 10] {
        x @ w
    }
}

fn main() {}
