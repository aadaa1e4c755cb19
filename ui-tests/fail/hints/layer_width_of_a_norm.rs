use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    fc: Linear<8, 12>,
    norm: RmsNorm<8>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 8]) -> [B, 12] {
            self.norm(self.fc(x))
        }
    }
}

fn main() {}
