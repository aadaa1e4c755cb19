use rumus::prelude::*;

const HIDDEN: usize = 512;

#[model(sequential, activation = relu)]
struct Mlp {
    l1: Linear<784, HIDDEN>,
    l2: Linear<256, 10>,
}

fn main() {}
