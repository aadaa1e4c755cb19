use rumus::prelude::*;

tensor_fn! {
    fn merge(x: [T, 64]) -> [T, 64] {
        x.merge_heads()
    }
}

fn main() {}
