use rumus::prelude::*;
#[model]
struct Net {
    embed: Embedding<100, 16>,
}

#[model]
impl Net {
    tensor_fn! {
        fn forward(&self, ids: [B, T]) -> [B, T, 16] {
            self.embed(ids)
        }
    }
}

fn main() {}
