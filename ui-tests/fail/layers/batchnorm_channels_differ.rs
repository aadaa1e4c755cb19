use rumus::prelude::*;
#[model]
struct Net {
    conv: Conv2d<1, 32, 3>,
    bn: BatchNorm2d<16>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 1, 28, 28]) -> [B, 32, 26, 26] {
            self.bn(self.conv(x))
        }
    }
}

fn main() {}
