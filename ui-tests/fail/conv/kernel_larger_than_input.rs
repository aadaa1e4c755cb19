use rumus::prelude::*;

#[model]
struct Tiny {
    conv: Conv2d<1, 4, 5>,
}

#[model]
impl Tiny {
    tensor_fn! {
        fn forward(&self, x: [B, 1, 3, 3]) -> [B, 4, 1, 1] {
            self.conv(x)
        }
    }
}

fn main() {}
