use rumus::prelude::*;

tensor_fn! {
    fn regroup(x: [B, 12]) -> [B, 3, 4] {
        x.reshape([B, _, _])
    }
}

fn main() {}
