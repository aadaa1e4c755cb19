use rumus::prelude::*;

#[model(sequential, activation = relu)]
struct Mlp {
    l1: Linear<784, 512>,
    l2: Linear<511, 10>,
}

fn main() {}
