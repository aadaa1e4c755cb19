use rumus::prelude::*;

tensor_fn! {
    fn pool(x: [B, 8, 3, 3]) -> [B, 8, 1, 1] {
        x.max_pool2d(4)
    }
}

fn main() {}
