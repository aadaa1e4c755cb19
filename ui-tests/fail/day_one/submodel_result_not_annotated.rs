//! A nested model's output, used without a shape: the hint must not guess the input's.
use rumus::prelude::*;

#[model(sequential, activation = relu)]
struct Encoder {
    a: Linear<784, 256>,
    b: Linear<256, 64>,
}

#[model]
struct Classifier {
    encoder: Encoder,
    head: Linear<64, 10>,
}

#[model]
impl Classifier {
    tensor_fn! {
        fn forward(&self, x: [B, 784]) -> [B, 10] {
            self.head(self.encoder(x))
        }
    }
}

fn main() {}
