use rumus::prelude::*;

tensor_fn! {
    fn constant(x: [B, 4]) -> [B, 4] {
        let c = 2.0 * 3.0;
        x + c
    }
}

fn main() {}
