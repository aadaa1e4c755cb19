use rumus::prelude::*;

tensor_fn! {
    fn pool(x: [B, 32, 13, 13]) -> [B, 32, 6, 6] {
        x.max_pool2d_exact(2)
    }
}

fn main() {}
