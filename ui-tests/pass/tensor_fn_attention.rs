//! Multi-head self-attention written in the DSL: head split, scores, merge.
use rumus::prelude::*;

tensor_fn! {
    /// Single-layer self-attention with 4 heads of width 8.
    fn attend(x: [B, T, 32], wq: [32, 32], wk: [32, 32], wv: [32, 32]) -> [B, T, 32] {
        let q = (x @ wq).split_heads(4);
        let k = (x @ wk).split_heads(4);
        let v = (x @ wv).split_heads(4);
        let scores = (q @ k.transpose(2, 3)) * 0.35355339;
        let mixed = scores.softmax(-1) @ v;
        mixed.merge_heads() + x
    }
}

fn main() -> rumus::Result<()> {
    let x = Tensor::<(Dyn, Dyn, D<32>)>::randn_with_dims(&[2, 5, 32])?;
    let w = || Tensor::<(D<32>, D<32>)>::randn().mul_scalar(0.1);
    let y = attend(&x, &w(), &w(), &w())?;
    assert_eq!(y.dims(), &[2, 5, 32]);
    Ok(())
}
