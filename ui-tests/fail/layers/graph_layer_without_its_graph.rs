use rumus::nn::GcnConv;
use rumus::prelude::*;

#[model]
struct Gnn {
    conv: GcnConv<8, 16>,
}

#[model]
impl Gnn {
    tensor_fn! {
        fn forward(&self, x: [N, 8]) -> [N, 16] {
            self.conv(x)
        }
    }
}

fn main() {}
