//! A generic block used inside another model with an input of the wrong width: one error,
//! on the call.
use rumus::prelude::*;

#[model]
struct Block<const C: usize> {
    fc: Linear<C, C>,
}

#[model]
impl<const C: usize> Block<C> {
    tensor_fn! {
        fn forward(&self, x: [B, C]) -> [B, C] {
            relu(self.fc(x)) + x
        }
    }
}

#[model]
struct Net {
    block: Block<32>,
    head: Linear<32, 10>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, 64]) -> [B, 10] {
            let h: [B, 32] = self.block(x);
            self.head(h)
        }
    }
}

fn main() {}
