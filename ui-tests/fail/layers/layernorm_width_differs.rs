use rumus::prelude::*;
#[model]
struct Net {
    proj: Linear<16, 32>,
    norm: LayerNorm<64>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, x: [B, T, 16]) -> [B, T, 32] {
            self.norm(self.proj(x))
        }
    }
}

fn main() {}
