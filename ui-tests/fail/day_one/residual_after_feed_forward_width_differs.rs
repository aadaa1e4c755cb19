//! A transformer's feed-forward block that ends at 128 features instead of d_model 64.
use rumus::prelude::*;

#[model]
struct FeedForward {
    ff1: Linear<64, 256>,
    ff2: Linear<256, 128>,
    norm: LayerNorm<64>,
}

#[model]
impl FeedForward {
    tensor_fn! {
        fn forward(&self, x: [B, T, 64]) -> [B, T, 64] {
            let h = self.ff2(relu(self.ff1(x)));
            self.norm(h + x)
        }
    }
}

fn main() {}
