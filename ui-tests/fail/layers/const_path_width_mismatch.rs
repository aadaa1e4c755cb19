use rumus::prelude::*;

mod config {
    pub const HIDDEN: usize = 100;
}

#[model]
struct Net {
    fc1: Linear<784, { config::HIDDEN }>,
    fc2: Linear<128, 10>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 784]) -> [B, 10] {
            self.fc2(self.fc1(x).relu())
        }
    }
}

fn main() {}
