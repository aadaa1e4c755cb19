//! Typed application of a module. Generated code calls layers the macros do not know (user
//! modules, nested models) through this trait, so their shapes are still checked, by the
//! type system.

use super::activation::{Gelu, Relu, Sigmoid, Silu, Tanh};
use super::attention::{MultiheadAttention, TransformerEncoderBlock};
use super::conv::{Conv1d, Conv2d, ConvTranspose2d};
use super::dropout::Dropout;
use super::embedding::Embedding;
use super::linear::Linear;
use super::norm::{BatchNorm, GroupNorm, LayerNorm, RmsNorm};
use super::pool::{AdaptiveAvgPool2d, AvgPool2d, Flatten, MaxPool2d};
use super::recurrent::{Gru, Lstm};
use crate::element::Element;
use crate::error::Result;
use crate::shape::{D, Dim, Dyn, Shape};
use crate::tensor::Tensor;

/// A module that maps tensors of shape `In` and element type `E` (`f32` unless named; an
/// [`Embedding`] takes `i64` indices) to `f32` tensors of shape `Self::Out`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot take an input of shape `{In}` and element type `{E}`",
    label = "no `Forward<{In}, {E}>` implementation for this module",
    note = "check the input's last dims against the layer's declared sizes, and its element type (embeddings take i64 indices: in `tensor_fn!`, `ids: [B, T; i64]`)"
)]
pub trait Forward<In: Shape, E: Element = f32> {
    /// The output shape.
    type Out: Shape;
    /// Applies the module.
    fn forward_typed(&self, x: &Tensor<In, E>) -> Result<Tensor<Self::Out>>;
}

#[diagnostic::do_not_recommend]
impl<B: Dim, const IN: usize, const OUT: usize> Forward<(B, D<IN>)> for Linear<IN, OUT> {
    type Out = (B, D<OUT>);
    fn forward_typed(&self, x: &Tensor<(B, D<IN>)>) -> Result<Tensor<Self::Out>> {
        self.try_forward(x)
    }
}

#[diagnostic::do_not_recommend]
impl<B: Dim, T: Dim, const IN: usize, const OUT: usize> Forward<(B, T, D<IN>)> for Linear<IN, OUT> {
    type Out = (B, T, D<OUT>);
    fn forward_typed(&self, x: &Tensor<(B, T, D<IN>)>) -> Result<Tensor<Self::Out>> {
        Ok(Tensor::wrap(self.forward_dyn(x.as_dyn())?))
    }
}

/// Implements `Forward<$in> for $layer` by calling `forward_dyn` and wrapping the result as
/// `$out` (its static dims are guaranteed by the layer; runtime ones come from the data).
macro_rules! typed_forward {
    ($([$($generics:tt)*] $layer:ty : $in:ty $(as $elem:ty)? => $out:ty, |$s:ident, $x:ident| $call:expr;)*) => {$(
        #[diagnostic::do_not_recommend]
        impl<$($generics)*> Forward<$in $(, $elem)?> for $layer {
            type Out = $out;
            fn forward_typed(&self, x: &Tensor<$in $(, $elem)?>) -> Result<Tensor<Self::Out>> {
                let ($s, $x) = (self, x.as_dyn());
                Ok(Tensor::wrap($call?))
            }
        }
    )*};
}

typed_forward! {
    [B: Dim, const IN: usize, const OUT: usize, const K: usize, H: Dim, W: Dim]
        Conv2d<IN, OUT, K>: (B, D<IN>, H, W) => (B, D<OUT>, Dyn, Dyn), |s, x| s.forward_dyn(x);
    [B: Dim, const IN: usize, const OUT: usize, const K: usize, H: Dim, W: Dim]
        ConvTranspose2d<IN, OUT, K>: (B, D<IN>, H, W) => (B, D<OUT>, Dyn, Dyn), |s, x| s.forward_dyn(x);
    [B: Dim, const IN: usize, const OUT: usize, const K: usize, L: Dim]
        Conv1d<IN, OUT, K>: (B, D<IN>, L) => (B, D<OUT>, Dyn), |s, x| s.forward_dyn(x);
    [A: Dim, const N: usize] LayerNorm<N>: (A, D<N>) => (A, D<N>), |s, x| s.forward_dyn(x);
    [A: Dim, T: Dim, const N: usize] LayerNorm<N>: (A, T, D<N>) => (A, T, D<N>), |s, x| s.forward_dyn(x);
    [A: Dim, const N: usize] RmsNorm<N>: (A, D<N>) => (A, D<N>), |s, x| s.forward_dyn(x);
    [A: Dim, T: Dim, const N: usize] RmsNorm<N>: (A, T, D<N>) => (A, T, D<N>), |s, x| s.forward_dyn(x);
    [B: Dim, const C: usize] BatchNorm<C>: (B, D<C>) => (B, D<C>), |s, x| s.forward_dyn(x);
    [B: Dim, const C: usize, H: Dim, W: Dim] BatchNorm<C>: (B, D<C>, H, W) => (B, D<C>, H, W), |s, x| s.forward_dyn(x);
    [B: Dim, const G: usize, const C: usize, H: Dim, W: Dim]
        GroupNorm<G, C>: (B, D<C>, H, W) => (B, D<C>, H, W), |s, x| s.forward_dyn(x);
    [B: Dim, const V: usize, const N: usize] Embedding<V, N>: (B,) as i64 => (B, D<N>), |s, x| s.forward_dyn(x);
    [B: Dim, T: Dim, const V: usize, const N: usize] Embedding<V, N>: (B, T) as i64 => (B, T, D<N>), |s, x| s.forward_dyn(x);
    [B: Dim, T: Dim, const E: usize, const H: usize]
        MultiheadAttention<E, H>: (B, T, D<E>) => (B, T, D<E>), |s, x| s.forward_dyn(x, x, x, None, false);
    [B: Dim, T: Dim, const N: usize, const H: usize, const FF: usize]
        TransformerEncoderBlock<N, H, FF>: (B, T, D<N>) => (B, T, D<N>), |s, x| s.forward_dyn(x, None, false);
    [B: Dim, T: Dim, const IN: usize, const H: usize]
        Lstm<IN, H>: (B, T, D<IN>) => (B, T, D<H>), |s, x| s.forward_dyn(x, None).map(|(out, _)| out);
    [B: Dim, T: Dim, const IN: usize, const H: usize]
        Gru<IN, H>: (B, T, D<IN>) => (B, T, D<H>), |s, x| s.forward_dyn(x, None).map(|(out, _)| out);
    [B: Dim, C: Dim, H: Dim, W: Dim] MaxPool2d: (B, C, H, W) => (B, C, Dyn, Dyn), |s, x| s.forward_dyn(x);
    [B: Dim, C: Dim, H: Dim, W: Dim] AvgPool2d: (B, C, H, W) => (B, C, Dyn, Dyn), |s, x| s.forward_dyn(x);
    [B: Dim, C: Dim, H: Dim, W: Dim] AdaptiveAvgPool2d: (B, C, H, W) => (B, C, Dyn, Dyn), |s, x| s.forward_dyn(x);
    [B: Dim, C: Dim, H: Dim, W: Dim] Flatten: (B, C, H, W) => (B, Dyn), |s, x| s.forward_dyn(x);
    [S: Shape] Dropout: S => S, |s, x| s.forward_dyn(x);
    [S: Shape] Relu: S => S, |s, x| s.forward_dyn(x);
    [S: Shape] Sigmoid: S => S, |s, x| s.forward_dyn(x);
    [S: Shape] Tanh: S => S, |s, x| s.forward_dyn(x);
    [S: Shape] Gelu: S => S, |s, x| s.forward_dyn(x);
    [S: Shape] Silu: S => S, |s, x| s.forward_dyn(x);
}
