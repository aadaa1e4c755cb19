use rumus::prelude::*;

#[model(sequential, activation = relu)]
struct Encoder {
    a: Linear<16, 8>,
    b: Linear<8, 4>,
}

#[model]
struct Outer {
    encoder: Encoder,
    head: Linear<4, 2>,
}

#[model]
impl Outer {
    tensor_fn! {
        fn forward(&self, x: [B, 8]) -> [B, 2] {
            let h: [B, 4] = self.encoder(x);
            self.head(h)
        }
    }
}

fn main() {}
