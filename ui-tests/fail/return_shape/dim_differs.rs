use rumus::prelude::*;

tensor_fn! {
    fn logits(x: [B, 128], w: [128, 10]) -> [B, 12] {
        x @ w
    }
}

fn main() {}
