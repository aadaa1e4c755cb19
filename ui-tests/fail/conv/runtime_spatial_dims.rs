use rumus::prelude::*;

#[model]
struct Net {
    conv: Conv2d<3, 8, 3>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 3, H, W]) -> [B, 8, H, W] {
            self.conv(x)
        }
    }
}

fn main() {}
