//! `BatchNorm1d` normalises axis 1 of `[B, C, L]`, not the features of `[B, T, C]`.
use rumus::nn::BatchNorm1d;
use rumus::prelude::*;

#[model]
struct Block {
    norm: BatchNorm1d<64>,
}

#[model]
impl Block {
    tensor_fn! {
        fn forward(&self, x: [B, T, 64]) -> [B, 64, T] {
            self.norm(x)
        }
    }
}

fn main() {}
