use rumus::prelude::*;

const HIDDEN: usize = 512;

#[model]
struct Head {
    fc: Linear<HIDDEN, 10>,
}

#[model]
impl Head {
    tensor_fn! {
        fn forward(&self, x: [B, 784]) -> [B, 10] {
            self.fc(x)
        }
    }
}

fn main() {}
