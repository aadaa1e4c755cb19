use rumus::prelude::*;

tensor_fn! {
    fn attention_heads(x: [B, T, 100]) -> [B, 8, T, 12] {
        x.split_heads(8)
    }
}

fn main() {}
