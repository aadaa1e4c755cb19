use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    fc1: Checkpointed<Linear<6, 16>>,
    fc2: Linear<8, 3>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 6]) -> [B, 3] {
            self.fc2(self.fc1(x))
        }
    }
}

fn main() {}
