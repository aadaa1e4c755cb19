use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    lstm: Lstm<16, 32>,
    head: Linear<16, 4>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, T, 16]) -> [B, T, 4] {
            self.head(self.lstm(x))
        }
    }
}

fn main() {}
