use rumus::prelude::*;

#[model]
struct Net {
    conv: Conv2d<1, 4, 3>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 784]) -> [B, 4, 26, 26] {
            self.conv(x)
        }
    }
}

fn main() {}
