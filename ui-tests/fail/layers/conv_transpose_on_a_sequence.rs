use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    up: ConvTranspose2d<8, 4, 2>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 8, 32]) -> [B, 4, 64] {
            self.up(x)
        }
    }
}

fn main() {}
