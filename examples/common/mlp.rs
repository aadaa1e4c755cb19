//! The MLP the benchmarks time: 784-256-128-10 with ReLU, the size of an MNIST classifier.

use rumus::prelude::*;

#[model(sequential, activation = relu)]
pub struct Mlp {
    fc1: Linear<784, 256>,
    fc2: Linear<256, 128>,
    fc3: Linear<128, 10>,
}
