use rumus::prelude::*;

tensor_fn! {
    fn logits(x: [B, 784], w: [512, 10]) -> [B, 10] {
        x @ w
    }
}

fn main() {}
