//! `_` is for sizes computed at run time, not for a parameter's.
use rumus::prelude::*;

tensor_fn! {
    fn pool(x: [B, _, 16]) -> [B, 16] {
        x.mean(1)
    }
}

fn main() {}
