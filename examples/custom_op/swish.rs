//! Swish with a fixed slope, `x * sigmoid(beta * x)`, as one custom op: one pass over the
//! elements forward and one backward, where the same formula written with built-in ops
//! (`x.mul(&x.mul_scalar(beta).sigmoid())`) runs three kernels forward and keeps two
//! intermediate tensors for the backward.

use std::sync::Arc;

use rumus::element::Float;
use rumus::ops::custom::{self, CustomOp, Input, Wgsl};
use rumus::{DynTensor, Error, Result, Shape, Tensor};

/// The op, with its slope.
pub struct Swish {
    pub beta: f64,
}

fn sigmoid<T: Float>(v: T) -> T {
    T::ONE / (T::ONE + (-v).exp())
}

impl CustomOp for Swish {
    fn name(&self) -> &'static str {
        "swish"
    }

    fn output_dims(&self, inputs: &[&[usize]]) -> Result<Vec<usize>> {
        match inputs {
            [x] => Ok(x.to_vec()),
            _ => Err(Error::InvalidArgument {
                op: "swish",
                message: format!("takes one tensor, got {}", inputs.len()),
            }),
        }
    }

    fn forward<T: Float>(&self, inputs: &[Input<'_, T>], out: &mut [T]) -> Result<()> {
        let beta = T::from_f64(self.beta);
        for (y, &x) in out.iter_mut().zip(inputs[0].data) {
            *y = x * sigmoid(beta * x);
        }
        Ok(())
    }

    fn backward<T: Float>(
        &self,
        inputs: &[Input<'_, T>],
        output: &[T],
        grad_output: &[T],
        grads: &mut [Option<&mut [T]>],
    ) -> Result<()> {
        let Some(dx) = grads[0].as_deref_mut() else {
            return Ok(());
        };
        let beta = T::from_f64(self.beta);
        let x = inputs[0].data;
        for i in 0..dx.len() {
            let s = sigmoid(beta * x[i]);
            dx[i] = grad_output[i] * (s + beta * output[i] * (T::ONE - s));
        }
        Ok(())
    }

    fn wgsl(&self) -> Option<Wgsl> {
        Some(Wgsl {
            source: include_str!("swish.wgsl"),
            forward: "swish_forward",
            backward: "swish_backward",
        })
    }

    fn wgsl_params(&self) -> Vec<u32> {
        vec![(self.beta as f32).to_bits()]
    }
}

/// `x * sigmoid(beta * x)` on a tensor of any shape and device.
pub fn swish(x: &DynTensor, beta: f64) -> Result<DynTensor> {
    custom::apply(&Arc::new(Swish { beta }), &[x])
}

/// The same on a shape-typed tensor; the shape is unchanged.
pub fn swish_typed<S: Shape>(x: &Tensor<S>, beta: f64) -> Result<Tensor<S>> {
    swish(x.as_dyn(), beta)?.try_shape::<S>()
}
