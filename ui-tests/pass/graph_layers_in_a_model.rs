//! Graph layers in `#[model]`: feature widths checked at compile time, the node count a
//! runtime size, the graph passed as a parameter that is not a tensor.
use rumus::nn::{GatConv, GcnConv};
use rumus::prelude::*;
use rumus::sparse::Graph;

#[model]
struct Gnn {
    conv1: GcnConv<8, 16>,
    attend: GatConv<16, 4, 2>,
    conv2: GcnConv<8, 3>,
}

#[model]
impl Gnn {
    tensor_fn! {
        fn forward(&self, x: [N, 8], graph: &Graph) -> [N, 3] {
            let h = self.conv1(x, graph).relu();   // [N, 16]
            let h = self.attend(h, graph);         // 2 heads of 4: [N, 8]
            self.conv2(h, graph)
        }
    }
}

fn main() -> rumus::Result<()> {
    let model = Gnn::new()?;
    let graph = Graph::from_edges(&[0, 1, 2, 3], &[1, 2, 0, 2], 4)?;
    let x = Tensor::<(Dyn, D<8>)>::randn_with_dims(&[4, 8])?;
    assert_eq!(model.forward(&x, &graph)?.dims(), &[4, 3]);
    Ok(())
}
