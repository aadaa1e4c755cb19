//! The value that does not fit was bound by a `let` two lines up, and went through a
//! LayerNorm of the wrong width too.
use rumus::prelude::*;

#[model]
struct Block {
    fc: Linear<64, 32>,
    ln: LayerNorm<32>,
}

#[model]
impl Block {
    tensor_fn! {
        fn forward(&self, x: [B, 64]) -> [B, 64] {
            let h = self.ln(self.fc(x));
            let h = relu(h);
            h + x
        }
    }
}

fn main() {}
