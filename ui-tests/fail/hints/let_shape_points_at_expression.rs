use rumus::prelude::*;

tensor_fn! {
    fn scores(q: [B, T, 16], k: [B, T, 16]) -> [B, T, T] {
        let s: [B, T, 16] = q @ k.transpose(1, 2);
        s.softmax(-1)
    }
}

fn main() {}
