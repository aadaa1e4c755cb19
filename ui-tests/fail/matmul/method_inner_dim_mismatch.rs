use rumus::prelude::*;

tensor_fn! {
    fn product(a: [B, 8], b: [4, 2]) -> [B, 2] {
        a.matmul(b)
    }
}

fn main() {}
