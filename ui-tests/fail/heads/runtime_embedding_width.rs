use rumus::prelude::*;

tensor_fn! {
    fn attention_heads(x: [B, T, E]) -> [B, 4, T, E] {
        x.split_heads(4)
    }
}

fn main() {}
