use rumus::prelude::*;

tensor_fn! {
    fn drop_axis(x: [B, 3, 8]) -> [B, 8] {
        x.squeeze(1)
    }
}

fn main() {}
