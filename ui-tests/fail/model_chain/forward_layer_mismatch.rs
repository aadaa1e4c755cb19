use rumus::prelude::*;

#[model]
struct Classifier {
    fc1: Linear<3136, 128>,
    fc2: Linear<128, 10>,
}

#[model]
impl Classifier {
    tensor_fn! {
        fn forward(&self, x: [B, 64, 5, 5]) -> [B, 10] {
            let h = self.fc1(x.flatten(1)).relu();
            self.fc2(h)
        }
    }
}

fn main() {}
