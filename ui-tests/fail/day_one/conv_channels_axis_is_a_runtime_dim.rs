//! Axis 1 is the sequence length, and no axis has the conv's 64 channels: the message must
//! not suggest a layer with `T` channels.
use rumus::prelude::*;

#[model]
struct Tagger {
    conv: Conv1d<64, 128, 3>,
}

#[model]
impl Tagger {
    tensor_fn! {
        fn forward(&self, x: [B, T, 32]) -> [B, 128, _] {
            self.conv(x)
        }
    }
}

fn main() {}
