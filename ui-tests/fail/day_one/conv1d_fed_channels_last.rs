//! A sequence model keeps `[B, T, C]`; `Conv1d` takes channels first.
use rumus::prelude::*;

#[model]
struct Tagger {
    #[conv(padding = 1)]
    conv: Conv1d<64, 128, 3>,
}

#[model]
impl Tagger {
    tensor_fn! {
        fn forward(&self, x: [B, T, 64]) -> [B, 128, T] {
            self.conv(x)
        }
    }
}

fn main() {}
