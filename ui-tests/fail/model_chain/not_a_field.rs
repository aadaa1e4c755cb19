use rumus::prelude::*;

#[model]
struct Net {
    fc: Linear<8, 2>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 8]) -> [B, 2] {
            self.head(x)
        }
    }
}

fn main() {}
