//! Fully connected layer, `y = x W^T + b`, with the weight stored `[out, in]` like PyTorch.

use super::module::Module;
use crate::dtype::DType;
use crate::error::Result;
use crate::shape::{D, Dim};
use crate::tensor::{DynTensor, Tensor};

/// `Linear<IN, OUT>`: maps the last axis from `IN` to `OUT` features.
///
/// The parameters are untyped, as in every layer: their element type is the model's choice
/// (`f32` from the constructors; `f64` for a finite-difference check), while the typed
/// [`forward`](Linear::forward) takes and returns `f32` tensors.
pub struct Linear<const IN: usize, const OUT: usize> {
    /// `[OUT, IN]`.
    pub weight: DynTensor,
    /// `[OUT]`, absent for `Linear::without_bias`.
    pub bias: Option<DynTensor>,
}

impl<const IN: usize, const OUT: usize> Linear<IN, OUT> {
    /// Weight and bias drawn from U(-1/sqrt(IN), 1/sqrt(IN)) with the global generator, as
    /// PyTorch's default initialisation.
    pub fn new() -> Result<Self> {
        let mut layer = Self::without_bias()?;
        let bound = super::init::fan_in_bound(IN);
        layer.bias = Some(DynTensor::uniform(&[OUT], -bound, bound, DType::F32)?.requires_grad_()?);
        Ok(layer)
    }

    /// A layer without a bias term.
    pub fn without_bias() -> Result<Self> {
        let bound = 1.0 / (IN as f64).sqrt();
        let weight = DynTensor::uniform(&[OUT, IN], -bound, bound, DType::F32)?.requires_grad_()?;
        Ok(Linear { weight, bias: None })
    }

    /// Applies the layer to the last axis of a tensor of any rank (untyped).
    pub fn forward_dyn(&self, x: &DynTensor) -> Result<DynTensor> {
        if x.dims().last() != Some(&IN) {
            return Err(crate::error::ShapeError::Invalid {
                context: format!("Linear<{IN}, {OUT}>"),
                message: format!(
                    "the layer takes [.., {IN}] but got {:?}; feed it {IN} features on the last axis, or declare Linear<{}, {OUT}>",
                    x.dims(),
                    x.dims().last().map_or("..".to_string(), ToString::to_string),
                ),
            }
            .into());
        }
        x.linear(&self.weight, self.bias.as_ref())
    }

    /// `[B, IN] -> [B, OUT]`; an error when the parameters are not `f32` or sit on another
    /// device than `x`.
    pub fn try_forward<B: Dim>(&self, x: &Tensor<(B, D<IN>)>) -> Result<Tensor<(B, D<OUT>)>> {
        Ok(Tensor::wrap(self.forward_dyn(x.as_dyn())?))
    }

    /// [`try_forward`](Linear::try_forward), panicking on its error.
    #[track_caller]
    pub fn forward<B: Dim>(&self, x: &Tensor<(B, D<IN>)>) -> Tensor<(B, D<OUT>)> {
        crate::tensor::typed::proven(self.try_forward(x))
    }
}

impl<const IN: usize, const OUT: usize> Module for Linear<IN, OUT> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        f(&format!("{prefix}weight"), &self.weight);
        if let Some(bias) = &self.bias {
            f(&format!("{prefix}bias"), bias);
        }
    }

    fn describe(&self) -> String {
        format!(
            "Linear(in_features={IN}, out_features={OUT}, bias={})",
            self.bias.is_some()
        )
    }
}
