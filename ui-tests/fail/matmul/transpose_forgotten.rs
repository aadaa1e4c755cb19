use rumus::prelude::*;

tensor_fn! {
    fn gram(x: [N, 16]) -> [N, N] {
        x @ x
    }
}

fn main() {}
