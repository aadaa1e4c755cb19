use rumus::prelude::*;
#[model]
struct Net {
    #[pool(size = 2)]
    pool: MaxPool2d,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 3, 8, 8]) -> [B, 3, 4, 4] {
            self.pool(x)
        }
    }
}

fn main() {}
