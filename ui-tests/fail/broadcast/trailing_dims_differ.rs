use rumus::prelude::*;

tensor_fn! {
    fn add_bias(x: [B, 10], b: [12]) -> [B, 10] {
        x + b
    }
}

fn main() {}
