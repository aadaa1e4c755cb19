use rumus::prelude::*;
#[model]
struct Net {
    conv: Conv1d<8, 16, 3>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 4, 32]) -> [B, 16, 30] {
            self.conv(x)
        }
    }
}

fn main() {}
