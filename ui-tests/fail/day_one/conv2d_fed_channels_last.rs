//! Images decoded as `[B, H, W, 3]` (NHWC); `Conv2d` takes `[B, 3, H, W]`.
use rumus::prelude::*;

#[model]
struct Stem {
    #[conv(padding = 1)]
    conv: Conv2d<3, 16, 3>,
}

#[model]
impl Stem {
    tensor_fn! {
        fn forward(&self, images: [B, H, W, 3]) -> [B, 16, H, W] {
            self.conv(images)
        }
    }
}

fn main() {}
