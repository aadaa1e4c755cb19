use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    norm: GroupNorm<3, 8>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 8, 4, 4]) -> [B, 8, 4, 4] {
            self.norm(x)
        }
    }
}

fn main() {}
