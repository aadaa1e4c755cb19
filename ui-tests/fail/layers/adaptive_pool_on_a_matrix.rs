use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    #[pool(output = 1)]
    pool: AdaptiveAvgPool2d,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 10]) -> [B, 10] {
            self.pool(x)
        }
    }
}

fn main() {}
