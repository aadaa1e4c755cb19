use rumus::prelude::*;

tensor_fn! {
    fn reorder(x: [B, T, 8]) -> [B, T, 8] {
        x.permute([0, 1, 1])
    }
}

fn main() {}
