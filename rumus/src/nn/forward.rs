//! Typed application of a module. Generated code calls layers the macros do not know (user
//! modules, nested models) through this trait, so their shapes are still checked, by the
//! type system.

use super::linear::Linear;
use crate::error::Result;
use crate::shape::{D, Dim, Shape};
use crate::tensor::Tensor;

/// A module that maps tensors of shape `In` to tensors of shape `Self::Out`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot take an input of shape `{In}`",
    label = "no `Forward<{In}>` implementation for this module",
    note = "check the input's last dims against the layer's declared sizes"
)]
pub trait Forward<In: Shape> {
    /// The output shape.
    type Out: Shape;
    /// Applies the module.
    fn forward_typed(&self, x: &Tensor<In>) -> Result<Tensor<Self::Out>>;
}

#[diagnostic::do_not_recommend]
impl<B: Dim, const IN: usize, const OUT: usize> Forward<(B, D<IN>)> for Linear<IN, OUT> {
    type Out = (B, D<OUT>);
    fn forward_typed(&self, x: &Tensor<(B, D<IN>)>) -> Result<Tensor<Self::Out>> {
        Ok(self.forward(x))
    }
}

#[diagnostic::do_not_recommend]
impl<B: Dim, T: Dim, const IN: usize, const OUT: usize> Forward<(B, T, D<IN>)> for Linear<IN, OUT> {
    type Out = (B, T, D<OUT>);
    fn forward_typed(&self, x: &Tensor<(B, T, D<IN>)>) -> Result<Tensor<Self::Out>> {
        Ok(Tensor::wrap(self.forward_dyn(x.as_dyn())?))
    }
}
