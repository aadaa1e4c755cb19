use rumus::prelude::*;

tensor_fn! {
    fn pooled(x: [B, T, 64]) -> [B, 64, T] {
        let h = x.relu();
        h.sum(1)
    }
}

fn main() {}
