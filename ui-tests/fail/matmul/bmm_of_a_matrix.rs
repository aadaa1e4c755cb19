use rumus::prelude::*;

tensor_fn! {
    fn batched(a: [3, 8], b: [4, 8, 2]) -> [4, 3, 2] {
        a.bmm(b)
    }
}

fn main() {}
