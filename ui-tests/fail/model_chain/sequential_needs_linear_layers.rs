use rumus::prelude::*;

#[model(sequential)]
struct Net {
    conv: Conv2d<1, 4, 3>,
    fc: Linear<4, 2>,
}

fn main() {}
