use rumus::prelude::*;

tensor_fn! {
    fn scores(q: [B, T, 16], k: [B, T, 16]) -> [B, T, T] {
        let s: [B, T, T] = q @ k;
        s.softmax(-1)
    }
}

fn main() {}
