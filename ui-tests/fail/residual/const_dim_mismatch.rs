use rumus::prelude::*;

const HIDDEN: usize = 512;

tensor_fn! {
    fn project(x: [B, 784], w: [HIDDEN, 10]) -> [B, 10] {
        x @ w
    }
}

fn main() {}
