use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    attn: MultiheadAttention<100, 8>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, T, 100]) -> [B, T, 100] {
            self.attn(x)
        }
    }
}

fn main() {}
