use rumus::prelude::*;

tensor_fn! {
    fn flip(x: [B, T, 8]) -> [B, 8, T] {
        x.t()
    }
}

fn main() {}
