use rumus::prelude::*;

tensor_fn! {
    fn double(x: [B, 4]) -> [B, 4] {
        y + y
    }
}

fn main() {}
