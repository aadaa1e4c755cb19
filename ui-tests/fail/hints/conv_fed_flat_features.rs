use rumus::prelude::*;

#[model]
struct Net {
    conv: Conv2d<1, 8, 3>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 784]) -> [B, 8, 26, 26] {
            self.conv(x)
        }
    }
}

fn main() {}
