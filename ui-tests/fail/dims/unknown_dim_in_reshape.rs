use rumus::prelude::*;

tensor_fn! {
    fn regroup(x: [B, 64]) -> [B, 8, 8] {
        x.reshape([N, 8, 8])
    }
}

fn main() {}
