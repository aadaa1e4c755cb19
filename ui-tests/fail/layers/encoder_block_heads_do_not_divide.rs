use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    block: TransformerEncoderBlock<30, 4, 64>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, T, 30]) -> [B, T, 30] {
            self.block(x, causal)
        }
    }
}

fn main() {}
