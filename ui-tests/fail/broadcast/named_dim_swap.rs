use rumus::prelude::*;

tensor_fn! {
    fn mix(x: [B, T, 16], y: [T, B, 16]) -> [B, T, 16] {
        x + y
    }
}

fn main() {}
