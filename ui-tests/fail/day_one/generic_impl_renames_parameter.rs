//! The impl names the struct's const parameter differently.
use rumus::prelude::*;

#[model]
struct Block<const C: usize> {
    fc: Linear<C, C>,
}

#[model]
impl<const N: usize> Block<N> {
    tensor_fn! {
        fn forward(&self, x: [B, N]) -> [B, N] {
            relu(self.fc(x))
        }
    }
}

fn main() {}
