use rumus::prelude::*;

tensor_fn! {
    fn hidden(x: [B, 784], w: [784, 256]) -> [B, 256] {
        let h: [B, 128] = x @ w;
        h
    }
}

fn main() {}
