use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    attn: MultiheadAttention<16, 2>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, T, 32]) -> [B, T, 16] {
            self.attn(x)
        }
    }
}

fn main() {}
