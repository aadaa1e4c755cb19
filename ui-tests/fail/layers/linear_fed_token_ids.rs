use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    fc: Linear<16, 4>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, ids: [B, 16; i64]) -> [B, 4] {
            self.fc(ids)
        }
    }
}

fn main() {}
