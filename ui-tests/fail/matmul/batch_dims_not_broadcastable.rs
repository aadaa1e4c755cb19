use rumus::prelude::*;

tensor_fn! {
    fn batched(a: [4, 3, 8], b: [5, 8, 2]) -> [4, 3, 2] {
        a @ b
    }
}

fn main() {}
