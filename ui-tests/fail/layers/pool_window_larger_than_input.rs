use rumus::prelude::*;
#[model]
struct Net {
    #[pool(kernel = 8)]
    pool: AvgPool2d,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 3, 4, 4]) -> [B, 3, 1, 1] {
            self.pool(x)
        }
    }
}

fn main() {}
