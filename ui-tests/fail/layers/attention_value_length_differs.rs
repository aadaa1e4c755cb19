use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    attn: MultiheadAttention<16, 2>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, q: [B, T, 16], k: [B, S, 16], v: [B, T, 16]) -> [B, T, 16] {
            self.attn(q, k, v)
        }
    }
}

fn main() {}
