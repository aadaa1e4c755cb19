use rumus::prelude::*;

tensor_fn! {
    fn nothing(x: [B, 4]) -> [B, 4] {
        let unused = x;
        1.0
    }
}

fn main() {}
