use rumus::prelude::*;

#[model]
struct Net {
    conv1: Conv2d<1, 32, 3>,
    conv2: Conv2d<32, 64, 3>,
    fc1: Linear<3136, 128>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 1, 28, 28]) -> [B, 128] {
            let h = self.conv1(x).relu().max_pool2d(2);
            let h = self.conv2(h).relu().max_pool2d(2);
            self.fc1(h)
        }
    }
}

fn main() {}
