use rumus::prelude::*;

#[model]
struct Net {
    w: Tensor<(Dyn, D<784>)>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 784]) -> [B, 10] {
            x @ self.w.t()
        }
    }
}

fn main() {}
