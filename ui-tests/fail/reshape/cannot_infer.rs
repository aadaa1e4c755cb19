use rumus::prelude::*;

tensor_fn! {
    fn regroup(x: [B, 10]) -> [B, 3, 4] {
        x.reshape([B, 3, _])
    }
}

fn main() {}
