use rumus::nn::Embedding;
use rumus::prelude::*;

#[model]
struct Tagger {
    embed: Embedding<20, 16>,
}

#[model]
impl Tagger {
    tensor_fn! {
        // Embeddings look up rows by index: `ids: [B, T; i64]`.
        fn forward(&self, ids: [B, T]) -> [B, T, 16] {
            let embedded: [B, T, 16] = self.embed(ids);
            embedded
        }
    }
}

fn main() {}
