use rumus::prelude::*;

#[model]
struct Net {
    conv1: Conv2d<1, 32, 3>,
    conv2: Conv2d<16, 64, 3>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 1, 28, 28]) -> [B, 64, 24, 24] {
            let h = self.conv1(x).relu();
            self.conv2(h)
        }
    }
}

fn main() {}
