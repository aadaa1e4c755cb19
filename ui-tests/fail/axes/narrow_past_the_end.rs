use rumus::prelude::*;

tensor_fn! {
    fn window(x: [B, 10]) -> [B, 4] {
        x.narrow(1, 8, 4)
    }
}

fn main() {}
