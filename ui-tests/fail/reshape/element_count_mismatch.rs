use rumus::prelude::*;

tensor_fn! {
    fn regroup(x: [B, 12, 10]) -> [B, 4, 32] {
        x.reshape([B, 4, 32])
    }
}

fn main() {}
