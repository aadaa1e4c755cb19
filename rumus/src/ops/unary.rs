//! Element-wise functions of one tensor: arithmetic with a scalar, math functions and
//! activations. One kernel walks the data; the op is matched once, outside the loop.

use super::BackwardOp;
use super::hooks::{OpCall, apply};
use crate::autograd::{Saved, is_grad_enabled};
use crate::backend::kinds::{FRAC_1_SQRT_2PI, GELU_TANH_COEF, SQRT_2_OVER_PI};
use crate::error::Result;
use crate::storage::Storage;
use crate::tensor::DynTensor;

pub use crate::backend::kinds::UnaryOp;

/// Ops whose gradient does not depend on the input keep no reference to it.
fn saves_input(op: UnaryOp) -> bool {
    !matches!(
        op,
        UnaryOp::Neg | UnaryOp::AddScalar(_) | UnaryOp::MulScalar(_)
    )
}

impl DynTensor {
    /// Applies `op` to every element (floating-point tensors only).
    pub fn unary(&self, op: UnaryOp) -> Result<DynTensor> {
        apply(OpCall::Unary(op), &[self], |tape| {
            let out = self.unary_untracked(op)?;
            if matches!(op, UnaryOp::Sign | UnaryOp::Floor) {
                // (piecewise constant: no gradient to record)
                return Ok(out);
            }
            Ok(tape.node(out, || BackwardOp::Unary {
                op,
                input: saves_input(op).then(|| Saved::new(self)),
            }))
        })
    }

    pub(crate) fn unary_untracked(&self, op: UnaryOp) -> Result<DynTensor> {
        let out = Storage::unary(self.operand(), op)?;
        Ok(DynTensor::computed(out, self.dims()))
    }

    /// `-x` per element.
    pub fn neg(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Neg)
    }
    /// `e^x` per element.
    pub fn exp(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Exp)
    }
    /// Natural logarithm.
    pub fn log(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Log)
    }
    /// Square root per element (NaN for negative inputs).
    pub fn sqrt(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Sqrt)
    }
    /// `ln(1 + x)` per element, accurate near zero (PyTorch's `torch.log1p`).
    pub fn log1p(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Log1p)
    }
    /// `1 / sqrt(x)`.
    pub fn rsqrt(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Rsqrt)
    }
    /// `|x|` per element.
    pub fn abs(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Abs)
    }
    /// -1, 0 or 1 per element (not differentiable; never tracked).
    pub fn sign(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Sign)
    }
    /// The Gauss error function.
    pub fn erf(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Erf)
    }
    /// Sine per element (radians).
    pub fn sin(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Sin)
    }
    /// Cosine per element (radians).
    pub fn cos(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Cos)
    }
    /// The largest integer not above each element, as a float (not differentiable; never
    /// tracked).
    pub fn floor(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Floor)
    }
    /// `max(x, 0)` per element, as PyTorch's `F.relu`.
    pub fn relu(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Relu)
    }
    /// `x` where positive, `negative_slope * x` elsewhere, as PyTorch's `F.leaky_relu`.
    pub fn leaky_relu(&self, negative_slope: f64) -> Result<DynTensor> {
        self.unary(UnaryOp::LeakyRelu(negative_slope))
    }
    /// `1 / (1 + e^-x)` per element.
    pub fn sigmoid(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Sigmoid)
    }
    /// Hyperbolic tangent per element.
    pub fn tanh(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Tanh)
    }
    /// GELU with the exact normal CDF (PyTorch's default `approximate='none'`).
    pub fn gelu(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Gelu)
    }
    /// GELU with the tanh approximation (`approximate='tanh'`).
    pub fn gelu_tanh(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::GeluTanh)
    }
    /// `x * sigmoid(x)`, also called swish.
    pub fn silu(&self) -> Result<DynTensor> {
        self.unary(UnaryOp::Silu)
    }
    /// Smooth ReLU `ln(1 + e^(beta x)) / beta`, exactly `x` where `beta x > threshold`.
    pub fn softplus(&self, beta: f64, threshold: f64) -> Result<DynTensor> {
        self.unary(UnaryOp::Softplus { beta, threshold })
    }
    /// `x ^ exponent` with a scalar exponent.
    pub fn powf(&self, exponent: f64) -> Result<DynTensor> {
        self.unary(UnaryOp::Powf(exponent))
    }
    /// Limits every element to `[min, max]`. With `min > max` every element is `max`, as in
    /// PyTorch (`min(max(x, min), max)`); the gradient then passes only where `x == max`
    /// (PyTorch's passes nowhere).
    pub fn clamp(&self, min: f64, max: f64) -> Result<DynTensor> {
        let min = if min > max { max } else { min };
        self.unary(UnaryOp::Clamp { min, max })
    }
    /// `self + scalar`.
    pub fn add_scalar(&self, scalar: f64) -> Result<DynTensor> {
        self.unary(UnaryOp::AddScalar(scalar))
    }
    /// `self * scalar`.
    pub fn mul_scalar(&self, scalar: f64) -> Result<DynTensor> {
        self.unary(UnaryOp::MulScalar(scalar))
    }
}

/// `grad * d op(x) / dx` of the activations in one pass over `grad` and `x`, when the
/// backward pass is not itself recorded and the backend has the kernel. The composite below
/// costs a pass and a buffer per op: relu's comparison, mask copy and select were 18% of a
/// small CNN's training step, and GELU's derivative is twelve ops.
fn fused_backward(grad: &DynTensor, op: UnaryOp, x: &DynTensor) -> Option<DynTensor> {
    if !op.gradient_in_one_pass() || is_grad_enabled() || grad.dims() != x.dims() {
        return None;
    }
    // A failure (operands on two devices, a lost GPU) leaves the gradient to the composite
    // path, which reports it.
    let out = Storage::activation_grad(grad.operand(), x.operand(), op, None).ok()??;
    Some(DynTensor::computed(out, grad.dims()))
}

/// `grad * d op(x) / dx`, written with differentiable ops so higher derivatives work.
pub(crate) fn unary_backward(
    grad: &DynTensor,
    op: UnaryOp,
    input: Option<&Saved>,
) -> Result<DynTensor> {
    let x = match input {
        Some(saved) => Some(saved.get(op.name())?),
        None => None,
    };
    if let Some(x) = x
        && let Some(fused) = fused_backward(grad, op, x)
    {
        return Ok(fused);
    }
    let x = || x.expect("ops that need their input save it");
    let zero = || DynTensor::scalar(0.0, grad.dtype());
    match op {
        UnaryOp::Neg => grad.neg(),
        UnaryOp::AddScalar(_) => Ok(grad.clone()),
        UnaryOp::MulScalar(s) => grad.mul_scalar(s),
        UnaryOp::Exp => grad.mul(&x().exp()?),
        UnaryOp::Log => grad.div(x()),
        UnaryOp::Log1p => grad.div(&x().add_scalar(1.0)?),
        UnaryOp::Sqrt => grad.mul(&x().rsqrt()?.mul_scalar(0.5)?),
        UnaryOp::Rsqrt => grad.mul(&x().powf(-1.5)?.mul_scalar(-0.5)?),
        UnaryOp::Abs => grad.mul(&x().sign()?),
        UnaryOp::Sign | UnaryOp::Floor => grad.mul_scalar(0.0),
        UnaryOp::Sin => grad.mul(&x().cos()?),
        UnaryOp::Cos => grad.mul(&x().sin()?.neg()?),
        UnaryOp::Erf => grad.mul(
            &x().mul(x())?
                .neg()?
                .exp()?
                .mul_scalar(std::f64::consts::FRAC_2_SQRT_PI)?,
        ),
        UnaryOp::Relu => DynTensor::where_(&x().gt_scalar(0.0)?, grad, &zero()?),
        UnaryOp::LeakyRelu(slope) => {
            DynTensor::where_(&x().gt_scalar(0.0)?, grad, &grad.mul_scalar(slope)?)
        }
        UnaryOp::Sigmoid => {
            let s = x().sigmoid()?;
            grad.mul(&s.mul(&s.rsub_scalar(1.0)?)?)
        }
        UnaryOp::Tanh => {
            let t = x().tanh()?;
            grad.mul(&t.mul(&t)?.rsub_scalar(1.0)?)
        }
        UnaryOp::Gelu => {
            // Phi(x) + x * phi(x)
            let x = x();
            let cdf = x
                .mul_scalar(std::f64::consts::FRAC_1_SQRT_2)?
                .erf()?
                .add_scalar(1.0)?
                .mul_scalar(0.5)?;
            let pdf = x
                .mul(x)?
                .mul_scalar(-0.5)?
                .exp()?
                .mul_scalar(FRAC_1_SQRT_2PI)?;
            grad.mul(&cdf.add(&x.mul(&pdf)?)?)
        }
        UnaryOp::GeluTanh => {
            // 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3))
            let x = x();
            let x2 = x.mul(x)?;
            let t = x
                .add(&x2.mul(x)?.mul_scalar(GELU_TANH_COEF)?)?
                .mul_scalar(SQRT_2_OVER_PI)?
                .tanh()?;
            let left = t.add_scalar(1.0)?.mul_scalar(0.5)?;
            let inner = x2
                .mul_scalar(3.0 * GELU_TANH_COEF)?
                .add_scalar(1.0)?
                .mul_scalar(SQRT_2_OVER_PI)?;
            let right = x
                .mul(&t.mul(&t)?.rsub_scalar(1.0)?)?
                .mul(&inner)?
                .mul_scalar(0.5)?;
            grad.mul(&left.add(&right)?)
        }
        UnaryOp::Silu => {
            // s (1 + x (1 - s))
            let x = x();
            let s = x.sigmoid()?;
            grad.mul(&s.mul(&x.mul(&s.rsub_scalar(1.0)?)?.add_scalar(1.0)?)?)
        }
        UnaryOp::Softplus { beta, threshold } => {
            let scaled = x().mul_scalar(beta)?;
            let linear = scaled.gt_scalar(threshold)?;
            DynTensor::where_(&linear, grad, &grad.mul(&scaled.sigmoid()?)?)
        }
        UnaryOp::Powf(p) => grad.mul(&x().powf(p - 1.0)?.mul_scalar(p)?),
        UnaryOp::Clamp { min, max } => {
            let x = x();
            let inside = x.ge_scalar(min)?.logical_and(&x.le_scalar(max)?)?;
            DynTensor::where_(&inside, grad, &zero()?)
        }
    }
}
