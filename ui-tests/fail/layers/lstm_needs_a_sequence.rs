use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    lstm: Lstm<16, 32>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 16]) -> [B, 32] {
            self.lstm(x)
        }
    }
}

fn main() {}
