use rumus::prelude::*;

tensor_fn! {
    fn probs(x: [B, 10]) -> [B, 10] {
        x.softmax(-3)
    }
}

fn main() {}
