use rumus::prelude::*;

tensor_fn! {
    fn project(x: [B, 8], w: [8, 16], b: [16]) -> [B, 16] {
        x.linear(w, b)
    }
}

fn main() {}
