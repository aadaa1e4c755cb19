use rumus::prelude::*;
use rumus::nn::*;
#[model]
struct Net {
    scale: Checkpointed<Tensor<(D<4>,)>>,
    fc: Linear<4, 2>,
}

fn main() {}
