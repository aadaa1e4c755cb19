use rumus::prelude::*;

tensor_fn! {
    fn logits(x: [B, 128]) -> [C, 128] {
        x
    }
}

fn main() {}
