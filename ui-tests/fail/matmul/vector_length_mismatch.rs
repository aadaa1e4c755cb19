use rumus::prelude::*;

tensor_fn! {
    fn project(v: [64], w: [32, 8]) -> [8] {
        v @ w
    }
}

fn main() {}
