use rumus::prelude::*;

#[model]
struct Strided {
    #[conv(stride = 2, exact)]
    conv: Conv2d<3, 8, 3>,
}

#[model]
impl Strided {
    tensor_fn! {
        fn forward(&self, x: [B, 3, 28, 28]) -> [B, 8, 13, 13] {
            self.conv(x)
        }
    }
}

fn main() {}
