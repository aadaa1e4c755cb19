use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    gru: Gru<16, 8>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, T, 32]) -> [B, T, 8] {
            self.gru(x)
        }
    }
}

fn main() {}
