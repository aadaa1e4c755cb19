use rumus::prelude::*;
#[model]
struct Net {
    #[dropout(p = 1.5)]
    drop: Dropout,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 8]) -> [B, 8] {
            self.drop(x)
        }
    }
}

fn main() {}
