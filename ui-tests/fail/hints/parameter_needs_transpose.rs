use rumus::prelude::*;

#[model]
struct Net {
    w: Tensor<(D<10>, D<784>)>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 784]) -> [B, 10] {
            x @ self.w
        }
    }
}

fn main() {}
