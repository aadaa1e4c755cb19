//! Building a module from its type alone, so generic code can make the layers it is
//! generic over.

use super::activation::{Gelu, Relu, Sigmoid, Silu, Tanh};
use super::attention::{MultiheadAttention, TransformerEncoderBlock};
use super::conv::{Conv1d, Conv2d, ConvTranspose2d};
use super::embedding::Embedding;
use super::linear::Linear;
use super::norm::{BatchNorm, GroupNorm, LayerNorm, RmsNorm};
use super::recurrent::{Gru, Lstm};
use crate::error::Result;

/// A module whose sizes are all in its type, built with its defaults (PyTorch's
/// initialisation, from the global generator). `#[model]` structs implement it through
/// their `new()`, and a `#[model]` struct generic over a layer type
/// (`struct Residual<L> { inner: L }`) builds that field with it:
///
/// ```
/// use rumus::nn::Construct;
/// use rumus::prelude::*;
///
/// #[model]
/// struct Twice<L> {
///     first: L,
///     second: L,
/// }
///
/// fn main() -> rumus::Result<()> {
///     let model = Twice::<Linear<4, 4>>::new()?;
///     assert_eq!(model.num_parameters(), 2 * (4 * 4 + 4));
///     let again = <Twice<Linear<4, 4>> as Construct>::construct()?;
///     assert_eq!(again.num_parameters(), model.num_parameters());
///     Ok(())
/// }
/// ```
pub trait Construct: Sized {
    /// The module with every parameter initialised as its `new()` does.
    fn construct() -> Result<Self>;
}

/// `Construct` through the layer's own `new()`.
macro_rules! construct_with_new {
    ($([$($generics:tt)*] $layer:ty;)*) => {$(
        impl<$($generics)*> Construct for $layer {
            fn construct() -> Result<Self> {
                <$layer>::new()
            }
        }
    )*};
}

construct_with_new! {
    [const IN: usize, const OUT: usize] Linear<IN, OUT>;
    [const IN: usize, const OUT: usize, const K: usize] Conv1d<IN, OUT, K>;
    [const IN: usize, const OUT: usize, const K: usize] Conv2d<IN, OUT, K>;
    [const IN: usize, const OUT: usize, const K: usize] ConvTranspose2d<IN, OUT, K>;
    [const N: usize] LayerNorm<N>;
    [const N: usize] RmsNorm<N>;
    [const C: usize] BatchNorm<C>;
    [const G: usize, const C: usize] GroupNorm<G, C>;
    [const V: usize, const N: usize] Embedding<V, N>;
    [const E: usize, const H: usize] MultiheadAttention<E, H>;
    [const N: usize, const H: usize, const FF: usize] TransformerEncoderBlock<N, H, FF>;
    [const IN: usize, const H: usize] Lstm<IN, H>;
    [const IN: usize, const H: usize] Gru<IN, H>;
    [] Relu;
    [] Gelu;
    [] Sigmoid;
    [] Silu;
    [] Tanh;
}
