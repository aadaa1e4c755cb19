use rumus::prelude::*;

#[model(sequential, activation = relu)]
struct Encoder {
    a: Linear<16, 8>,
    b: Linear<8, 4>,
}

#[model]
struct Outer {
    encoder: Encoder,
    head: Linear<6, 2>,
}

#[model]
impl Outer {
    tensor_fn! {
        fn forward(&self, x: [B, 16]) -> [B, 2] {
            let h: [B, 6] = self.encoder(x);
            self.head(h)
        }
    }
}

fn main() {}
