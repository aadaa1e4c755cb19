//! Element-wise functions of one tensor: arithmetic with a scalar, math functions and
//! activations. One kernel walks the data; the op is matched once, outside the loop.

use super::BackwardOp;
use crate::autograd::{Saved, is_grad_enabled, record};
use crate::backend::cpu::strided::{map, zip_map};
use crate::element::{Element, Float};
use crate::error::Result;
use crate::ops::elementwise::read_pair;
use crate::shape::Layout;
use crate::storage::CpuBuffer;
use crate::tensor::{DynTensor, with_float};

const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
const GELU_TANH_COEF: f64 = 0.044_715;
const FRAC_1_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// A function applied to every element.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `e^x`.
    Exp,
    /// Natural logarithm.
    Log,
    /// Square root.
    Sqrt,
    /// `1 / sqrt(x)`.
    Rsqrt,
    /// `|x|`.
    Abs,
    /// -1, 0 or 1; its gradient is zero everywhere.
    Sign,
    /// The Gauss error function.
    Erf,
    /// Sine (radians).
    Sin,
    /// Cosine (radians).
    Cos,
    /// The largest integer not above `x`; its gradient is zero everywhere.
    Floor,
    /// `max(x, 0)`.
    Relu,
    /// `x` for `x > 0`, else `x` times the slope held.
    LeakyRelu(f64),
    /// `1 / (1 + e^-x)`, computed without overflow for either sign.
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// `x * Phi(x)` with the exact normal CDF.
    Gelu,
    /// The tanh approximation of GELU used by GPT-2.
    GeluTanh,
    /// `x * sigmoid(x)` (swish).
    Silu,
    /// `ln(1 + e^(beta x)) / beta`, linear above `threshold` (PyTorch's defaults: 1, 20).
    Softplus {
        /// Sharpness: larger values approach ReLU.
        beta: f64,
        /// Above this value of `beta x` the result is `x`.
        threshold: f64,
    },
    /// `x ^ p` with the scalar exponent held.
    Powf(f64),
    /// `x` limited to `[min, max]`; NaN stays NaN.
    Clamp {
        /// Lower bound.
        min: f64,
        /// Upper bound.
        max: f64,
    },
    /// `x + s` with the scalar held.
    AddScalar(f64),
    /// `x * s` with the scalar held.
    MulScalar(f64),
}

impl UnaryOp {
    /// The op's lowercase name (`"relu"`, `"add_scalar"`), as error messages show it.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Abs => "abs",
            UnaryOp::Sign => "sign",
            UnaryOp::Erf => "erf",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Floor => "floor",
            UnaryOp::Relu => "relu",
            UnaryOp::LeakyRelu(_) => "leaky_relu",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Gelu => "gelu",
            UnaryOp::GeluTanh => "gelu_tanh",
            UnaryOp::Silu => "silu",
            UnaryOp::Softplus { .. } => "softplus",
            UnaryOp::Powf(_) => "powf",
            UnaryOp::Clamp { .. } => "clamp",
            UnaryOp::AddScalar(_) => "add_scalar",
            UnaryOp::MulScalar(_) => "mul_scalar",
        }
    }

    /// Activations whose input gradient takes one pass over the output gradient and the
    /// input (`fused_backward`), on the host and on a GPU.
    pub(crate) fn gradient_in_one_pass(self) -> bool {
        matches!(
            self,
            UnaryOp::Relu
                | UnaryOp::LeakyRelu(_)
                | UnaryOp::Sigmoid
                | UnaryOp::Tanh
                | UnaryOp::Gelu
                | UnaryOp::GeluTanh
                | UnaryOp::Silu
        )
    }

    /// Ops whose gradient does not depend on the input keep no reference to it.
    fn saves_input(self) -> bool {
        !matches!(
            self,
            UnaryOp::Neg | UnaryOp::AddScalar(_) | UnaryOp::MulScalar(_)
        )
    }
}

#[inline(always)]
fn sigmoid<T: Float>(x: T) -> T {
    if x >= T::ZERO {
        T::ONE / (T::ONE + (-x).exp())
    } else {
        let e = x.exp();
        e / (T::ONE + e)
    }
}

fn unary_kernel<T: Float + Default>(a: &[T], layout: &Layout, op: UnaryOp) -> Vec<T> {
    let c = |v: f64| T::from_f64(v);
    let half = c(0.5);
    match op {
        UnaryOp::Neg => map(a, layout, |x: T| -x),
        UnaryOp::Exp => map(a, layout, |x: T| x.exp()),
        UnaryOp::Log => map(a, layout, |x: T| x.ln()),
        UnaryOp::Sqrt => map(a, layout, |x: T| x.sqrt()),
        UnaryOp::Rsqrt => map(a, layout, |x: T| T::ONE / x.sqrt()),
        UnaryOp::Abs => map(a, layout, |x: T| x.abs()),
        UnaryOp::Sign => map(a, layout, |x: T| {
            if x > T::ZERO {
                T::ONE
            } else if x < T::ZERO {
                -T::ONE
            } else {
                x
            }
        }),
        UnaryOp::Erf => map(a, layout, |x: T| x.erf()),
        UnaryOp::Sin => map(a, layout, |x: T| x.sin()),
        UnaryOp::Cos => map(a, layout, |x: T| x.cos()),
        UnaryOp::Floor => map(a, layout, |x: T| x.floor()),
        UnaryOp::Relu => map(a, layout, |x: T| if x > T::ZERO { x } else { T::ZERO }),
        UnaryOp::LeakyRelu(slope) => {
            let slope = c(slope);
            map(
                a,
                layout,
                move |x: T| if x > T::ZERO { x } else { x * slope },
            )
        }
        UnaryOp::Sigmoid => map(a, layout, sigmoid),
        UnaryOp::Tanh => map(a, layout, |x: T| x.tanh()),
        UnaryOp::Gelu => {
            let inv_sqrt2 = c(std::f64::consts::FRAC_1_SQRT_2);
            map(a, layout, move |x: T| {
                half * x * (T::ONE + (x * inv_sqrt2).erf())
            })
        }
        UnaryOp::GeluTanh => {
            let (k, coef) = (c(SQRT_2_OVER_PI), c(GELU_TANH_COEF));
            map(a, layout, move |x: T| {
                half * x * (T::ONE + (k * (x + coef * x * x * x)).tanh())
            })
        }
        UnaryOp::Silu => map(a, layout, |x: T| x * sigmoid(x)),
        UnaryOp::Softplus { beta, threshold } => {
            let (beta, threshold) = (c(beta), c(threshold));
            map(a, layout, move |x: T| {
                if x * beta > threshold {
                    x
                } else {
                    (x * beta).exp().ln_1p() / beta
                }
            })
        }
        UnaryOp::Powf(p) => {
            let p = c(p);
            map(a, layout, move |x: T| x.powf(p))
        }
        UnaryOp::Clamp { min, max } => {
            let (min, max) = (c(min), c(max));
            map(a, layout, move |x: T| {
                if x < min {
                    min
                } else if x > max {
                    max
                } else {
                    x
                }
            })
        }
        UnaryOp::AddScalar(s) => {
            let s = c(s);
            map(a, layout, move |x: T| x + s)
        }
        UnaryOp::MulScalar(s) => {
            let s = c(s);
            map(a, layout, move |x: T| x * s)
        }
    }
}

impl DynTensor {
    /// Applies `op` to every element (floating-point tensors only).
    pub fn unary(&self, op: UnaryOp) -> Result<DynTensor> {
        crate::onnx::op(
            || self.unary_untraced(op),
            |e, out| crate::onnx::onnx_unary(e, op, self, out),
        )
    }

    fn unary_untraced(&self, op: UnaryOp) -> Result<DynTensor> {
        let out = self.unary_untracked(op)?;
        if matches!(op, UnaryOp::Sign | UnaryOp::Floor) {
            // (piecewise constant: no gradient to record)
            return Ok(out);
        }
        Ok(record(out, &[self], || BackwardOp::Unary {
            op,
            input: op.saves_input().then(|| Saved::new(self)),
        }))
    }

    pub(crate) fn unary_untracked(&self, op: UnaryOp) -> Result<DynTensor> {
        #[cfg(feature = "gpu")]
        if let Some(gpu) = crate::device::gpu_of(op.name(), &[self])? {
            return gpu.unary(self, op);
        }
        // A broadcast view (`expand`) holds few values but its result holds all of them.
        crate::alloc::ensure_output(op.name(), self.dims(), self.dtype().size_in_bytes())?;
        let buffer = self.with_buffer(|buffer, layout| -> Result<_> {
            Ok(with_float!(buffer, op.name(), |data: T| T::into_buffer(
                unary_kernel(data, layout, op)
            )))
        })??;
        Ok(DynTensor::from_buffer(buffer, self.dims()))
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
/// backward pass is not itself recorded and both are f32/f64 on the host or f32 on one GPU.
/// The composite below costs a pass and a buffer per op: relu's comparison, mask copy and
/// select were 18% of a small CNN's training step, and GELU's derivative is twelve ops.
fn fused_backward(grad: &DynTensor, op: UnaryOp, x: &DynTensor) -> Option<DynTensor> {
    if !op.gradient_in_one_pass() || is_grad_enabled() || grad.dims() != x.dims() {
        return None;
    }
    #[cfg(feature = "gpu")]
    if grad.device().is_gpu() || x.device().is_gpu() {
        // Both on one GPU (else the composite reports the mismatch).
        let gpu = crate::device::gpu_of(op.name(), &[grad, x]).ok()??;
        return gpu.activation_grad(grad, x, op, None).ok()?;
    }
    fn chain<T: Float + Default>(
        g: &[T],
        lg: &Layout,
        x: &[T],
        lx: &Layout,
        op: UnaryOp,
    ) -> Vec<T> {
        match op {
            UnaryOp::Relu => zip_map(g, lg, x, lx, |g, x| if x > T::ZERO { g } else { T::ZERO }),
            UnaryOp::LeakyRelu(slope) => {
                let slope = T::from_f64(slope);
                zip_map(g, lg, x, lx, |g, x| if x > T::ZERO { g } else { g * slope })
            }
            UnaryOp::Sigmoid => zip_map(g, lg, x, lx, |g, x| {
                let s = sigmoid(x);
                g * (s * (T::ONE - s))
            }),
            UnaryOp::Tanh => zip_map(g, lg, x, lx, |g, x| {
                let t = x.tanh();
                g * (T::ONE - t * t)
            }),
            UnaryOp::Gelu => {
                let (half, inv_sqrt2) = (
                    T::from_f64(0.5),
                    T::from_f64(std::f64::consts::FRAC_1_SQRT_2),
                );
                let inv_sqrt_2pi = T::from_f64(FRAC_1_SQRT_2PI);
                zip_map(g, lg, x, lx, move |g, x| {
                    let cdf = half * (T::ONE + (x * inv_sqrt2).erf());
                    g * (cdf + x * inv_sqrt_2pi * (-half * x * x).exp())
                })
            }
            UnaryOp::GeluTanh => {
                let (half, k) = (T::from_f64(0.5), T::from_f64(SQRT_2_OVER_PI));
                let (coef, coef3) = (
                    T::from_f64(GELU_TANH_COEF),
                    T::from_f64(3.0 * GELU_TANH_COEF),
                );
                zip_map(g, lg, x, lx, move |g, x| {
                    let t = (k * (x + coef * x * x * x)).tanh();
                    let inner = k * (T::ONE + coef3 * x * x);
                    // Where t saturates the second term is 0 (not 0 * inf for huge x).
                    let slope = if t * t >= T::ONE {
                        T::ZERO
                    } else {
                        half * x * (T::ONE - t * t) * inner
                    };
                    g * (half * (T::ONE + t) + slope)
                })
            }
            UnaryOp::Silu => zip_map(g, lg, x, lx, |g, x| {
                let s = sigmoid(x);
                g * (s * (T::ONE + x * (T::ONE - s)))
            }),
            _ => unreachable!("checked fusable"),
        }
    }
    let (lg, lx) = (grad.layout().clone(), x.layout().clone());
    let buffer = read_pair(grad, x, |g, x| match (g, x) {
        (CpuBuffer::F32(g), CpuBuffer::F32(x)) => Some(f32::into_buffer(chain(g, &lg, x, &lx, op))),
        (CpuBuffer::F64(g), CpuBuffer::F64(x)) => Some(f64::into_buffer(chain(g, &lg, x, &lx, op))),
        _ => None,
    })
    // A failed read leaves the gradient to the unfused path, which reports it.
    .ok()
    .flatten()?;
    Some(DynTensor::from_buffer(buffer, grad.dims()))
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
