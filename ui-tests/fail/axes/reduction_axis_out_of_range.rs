use rumus::prelude::*;

tensor_fn! {
    fn total(x: [B, 10]) -> [B] {
        x.sum(2)
    }
}

fn main() {}
