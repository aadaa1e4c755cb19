use rumus::prelude::*;

tensor_fn! {
    fn pool(x: [B, 64]) -> [B, 32] {
        x.avg_pool2d(2)
    }
}

fn main() {}
