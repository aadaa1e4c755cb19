//! A residual block whose second convolution (and its BatchNorm) was declared with 32
//! channels where the skip has 64.
use rumus::nn::BatchNorm2d;
use rumus::prelude::*;

#[model]
struct Residual {
    #[conv(padding = 1)]
    conv1: Conv2d<64, 64, 3>,
    bn1: BatchNorm2d<64>,
    #[conv(padding = 1)]
    conv2: Conv2d<64, 32, 3>,
    bn2: BatchNorm2d<32>,
}

#[model]
impl Residual {
    tensor_fn! {
        fn forward(&self, x: [B, 64, H, W]) -> [B, 64, H, W] {
            let h = relu(self.bn1(self.conv1(x)));
            relu(self.bn2(self.conv2(h)) + x)
        }
    }
}

fn main() {}
