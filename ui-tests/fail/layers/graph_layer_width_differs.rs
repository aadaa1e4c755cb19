use rumus::nn::{GcnConv, SageConv};
use rumus::prelude::*;
use rumus::sparse::Graph;

#[model]
struct Gnn {
    conv1: GcnConv<8, 16>,
    conv2: SageConv<32, 3>,
}

#[model]
impl Gnn {
    tensor_fn! {
        fn forward(&self, x: [N, 8], graph: &Graph) -> [N, 3] {
            let h = self.conv1(x, graph).relu();
            self.conv2(h, graph)
        }
    }
}

fn main() {}
