use rumus::prelude::*;

tensor_fn! {
    fn reorder(x: [B, T, 8]) -> [T, B, 8] {
        x.permute([1, 0])
    }
}

fn main() {}
