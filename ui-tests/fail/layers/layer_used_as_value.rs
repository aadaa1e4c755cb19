use rumus::prelude::*;

#[model]
struct Net {
    fc: Linear<784, 10>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 784]) -> [B, 10] {
            x @ self.fc
        }
    }
}

fn main() {}
