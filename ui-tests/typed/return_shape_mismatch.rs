use rumus::prelude::*;

fn logits(x: &Tensor<(Dyn, D<128>)>, w: &Tensor<(D<128>, D<10>)>) -> Tensor<(Dyn, D<12>)> {
    x.matmul(w)
}

fn main() {}
