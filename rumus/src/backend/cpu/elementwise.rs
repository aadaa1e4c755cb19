//! Element-wise kernels of the CPU backend: one function per kind of op, the op matched once
//! outside the loop that walks the data (`strided::map` and friends), and the CPU's side of the
//! [`Pointwise`] contract.

use super::backend::{Cpu, ensure_output};
use super::buffer::{CpuBuffer, map_buffer, with_float};
use super::strided::{map, zip_map, zip3_map};
use crate::backend::contract::{Pointwise, Src};
use crate::backend::kinds::{
    BinaryOp, CompareOp, DropoutDraws, FRAC_1_SQRT_2PI, GELU_TANH_COEF, SQRT_2_OVER_PI, UnaryOp,
};
use crate::dtype::DType;
use crate::element::{Element, Float};
use crate::error::{Error, Result};
use crate::shape::Layout;

impl Pointwise for Cpu {
    fn unary(&self, x: Src<'_, CpuBuffer>, op: UnaryOp) -> Result<CpuBuffer> {
        ensure_output(op.name(), x.dims(), x.dtype())?;
        if let (CpuBuffer::F32(data), true) = (x.memory, x.layout.is_contiguous()) {
            let start = x.layout.offset();
            if let Some(out) = super::vector_math::forward(op, &data[start..start + x.numel()]) {
                return Ok(CpuBuffer::F32(out));
            }
        }
        Ok(with_float!(x.memory, op.name(), |data: T| T::into_buffer(
            unary(data, x.layout, op)
        )))
    }

    fn activation_grad(
        &self,
        grad: Src<'_, CpuBuffer>,
        x: Src<'_, CpuBuffer>,
        op: UnaryOp,
        draws: Option<DropoutDraws>,
    ) -> Result<Option<CpuBuffer>> {
        if !op.gradient_in_one_pass() || draws.is_some() {
            return Ok(None);
        }
        let (lg, lx) = (grad.layout, x.layout);
        Ok(match (grad.memory, x.memory) {
            (CpuBuffer::F32(g), CpuBuffer::F32(v)) => {
                let vectorised = (lg.is_contiguous() && lx.is_contiguous())
                    .then(|| {
                        let n = x.numel();
                        let (g, v) = (&g[lg.offset()..][..n], &v[lx.offset()..][..n]);
                        super::vector_math::backward(op, g, v)
                    })
                    .flatten();
                Some(CpuBuffer::F32(
                    vectorised.unwrap_or_else(|| activation_grad(g, lg, v, lx, op)),
                ))
            }
            (CpuBuffer::F64(g), CpuBuffer::F64(v)) => {
                Some(f64::into_buffer(activation_grad(g, lg, v, lx, op)))
            }
            _ => None,
        })
    }

    fn dropout(&self, x: Src<'_, CpuBuffer>, draws: DropoutDraws) -> Result<CpuBuffer> {
        if !x.layout.is_contiguous() {
            let copy = self.copy(x)?;
            let layout = Layout::contiguous(x.dims());
            return self.dropout(Src::new(&copy, &layout), draws);
        }
        let range = x.layout.offset()..x.layout.offset() + x.numel();
        let DropoutDraws { p, scale, seed } = draws;
        match x.memory {
            CpuBuffer::F32(v) => Ok(f32::into_buffer(super::dropout::dropout(
                &v[range],
                p,
                scale as f32,
                seed,
            ))),
            CpuBuffer::F64(v) => Ok(f64::into_buffer(super::dropout::dropout(
                &v[range], p, scale, seed,
            ))),
            other => Err(Error::DType {
                op: "dropout",
                expected: "a floating-point tensor (f32 or f64)",
                found: other.dtype(),
            }),
        }
    }

    fn binary(
        &self,
        a: Src<'_, CpuBuffer>,
        b: Src<'_, CpuBuffer>,
        op: BinaryOp,
    ) -> Result<CpuBuffer> {
        ensure_output(op.name(), a.dims(), a.dtype())?;
        let (la, lb) = (a.layout, b.layout);
        Ok(match (a.memory, b.memory) {
            (CpuBuffer::F32(a), CpuBuffer::F32(b)) => CpuBuffer::F32(binary(a, la, b, lb, op)),
            (CpuBuffer::F64(a), CpuBuffer::F64(b)) => CpuBuffer::F64(binary(a, la, b, lb, op)),
            (other, _) => {
                return Err(Error::DType {
                    op: op.name(),
                    expected: "a floating-point tensor",
                    found: other.dtype(),
                });
            }
        })
    }

    fn compare(
        &self,
        a: Src<'_, CpuBuffer>,
        b: Src<'_, CpuBuffer>,
        op: CompareOp,
    ) -> Result<CpuBuffer> {
        ensure_output("compare", a.dims(), DType::Bool)?;
        let (la, lb) = (a.layout, b.layout);
        let mask = match (a.memory, b.memory) {
            (CpuBuffer::F32(a), CpuBuffer::F32(b)) => compare(a, la, b, lb, op),
            (CpuBuffer::F64(a), CpuBuffer::F64(b)) => compare(a, la, b, lb, op),
            (CpuBuffer::I64(a), CpuBuffer::I64(b)) => compare(a, la, b, lb, op),
            (CpuBuffer::Bool(a), CpuBuffer::Bool(b)) => compare(a, la, b, lb, op),
            (a, b) => return Err(dtype_mismatch("compare", a, b)),
        };
        Ok(CpuBuffer::Bool(mask))
    }

    fn select(
        &self,
        condition: Src<'_, CpuBuffer>,
        on_true: Src<'_, CpuBuffer>,
        on_false: Src<'_, CpuBuffer>,
    ) -> Result<CpuBuffer> {
        ensure_output("where", condition.dims(), on_true.dtype())?;
        let CpuBuffer::Bool(c) = condition.memory else {
            return Err(Error::DType {
                op: "where",
                expected: "a bool condition",
                found: condition.dtype(),
            });
        };
        let c = (c.as_slice(), condition.layout);
        let (lt, lf) = (on_true.layout, on_false.layout);
        Ok(match (on_true.memory, on_false.memory) {
            (CpuBuffer::F32(t), CpuBuffer::F32(f)) => CpuBuffer::F32(select(c, (t, lt), (f, lf))),
            (CpuBuffer::F64(t), CpuBuffer::F64(f)) => CpuBuffer::F64(select(c, (t, lt), (f, lf))),
            (CpuBuffer::F16(t), CpuBuffer::F16(f)) => CpuBuffer::F16(select(c, (t, lt), (f, lf))),
            (CpuBuffer::I64(t), CpuBuffer::I64(f)) => CpuBuffer::I64(select(c, (t, lt), (f, lf))),
            (CpuBuffer::Bool(t), CpuBuffer::Bool(f)) => {
                CpuBuffer::Bool(select(c, (t, lt), (f, lf)))
            }
            (t, f) => return Err(dtype_mismatch("where", t, f)),
        })
    }

    fn logical_and(&self, a: Src<'_, CpuBuffer>, b: Src<'_, CpuBuffer>) -> Result<CpuBuffer> {
        ensure_output("logical_and", a.dims(), DType::Bool)?;
        match (a.memory, b.memory) {
            (CpuBuffer::Bool(x), CpuBuffer::Bool(y)) => Ok(CpuBuffer::Bool(zip_map(
                x,
                a.layout,
                y,
                b.layout,
                |x, y| x && y,
            ))),
            (CpuBuffer::Bool(_), other) | (other, _) => Err(not_a_mask("logical_and", other)),
        }
    }

    fn logical_not(&self, x: Src<'_, CpuBuffer>) -> Result<CpuBuffer> {
        ensure_output("logical_not", x.dims(), DType::Bool)?;
        match x.memory {
            CpuBuffer::Bool(v) => Ok(CpuBuffer::Bool(map(v, x.layout, |x: bool| !x))),
            other => Err(not_a_mask("logical_not", other)),
        }
    }

    fn cast(&self, x: Src<'_, CpuBuffer>, dtype: DType) -> Result<CpuBuffer> {
        ensure_output("to_dtype", x.dims(), dtype)?;
        fn to<S: Element + Default>(data: &[S], x: Src<'_, CpuBuffer>, dtype: DType) -> CpuBuffer {
            let layout = x.layout;
            match dtype {
                DType::F32 => CpuBuffer::F32(convert(data, layout)),
                DType::F64 => CpuBuffer::F64(convert(data, layout)),
                DType::F16 => CpuBuffer::F16(convert(data, layout)),
                DType::BF16 => CpuBuffer::BF16(convert(data, layout)),
                DType::I64 => CpuBuffer::I64(convert(data, layout)),
                DType::Bool => CpuBuffer::Bool(convert(data, layout)),
            }
        }
        Ok(match x.memory {
            CpuBuffer::F32(v) => to(v, x, dtype),
            CpuBuffer::F64(v) => to(v, x, dtype),
            CpuBuffer::F16(v) => to(v, x, dtype),
            CpuBuffer::BF16(v) => to(v, x, dtype),
            CpuBuffer::I64(v) => to(v, x, dtype),
            CpuBuffer::Bool(v) => to(v, x, dtype),
        })
    }

    fn copy(&self, x: Src<'_, CpuBuffer>) -> Result<CpuBuffer> {
        ensure_output("contiguous", x.dims(), x.dtype())?;
        if let CpuBuffer::F32(v) = x.memory
            && let Some(out) = super::strided::transposed_copy(v, x.layout)
        {
            return Ok(CpuBuffer::F32(out));
        }
        Ok(map_buffer!(x.memory, |v| map(v, x.layout, |e| e)))
    }
}

fn dtype_mismatch(op: &'static str, a: &CpuBuffer, b: &CpuBuffer) -> Error {
    Error::DTypeMismatch {
        op,
        lhs: a.dtype(),
        rhs: b.dtype(),
    }
}

fn not_a_mask(op: &'static str, found: &CpuBuffer) -> Error {
    Error::DType {
        op,
        expected: "bool masks",
        found: found.dtype(),
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

pub(super) fn unary<T: Float + Default>(a: &[T], layout: &Layout, op: UnaryOp) -> Vec<T> {
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
        UnaryOp::Log1p => map(a, layout, |x: T| x.ln_1p()),
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

pub(super) fn activation_grad<T: Float + Default>(
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

pub(super) fn binary<T: Float + Default>(
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
    op: BinaryOp,
) -> Vec<T> {
    match op {
        BinaryOp::Add => zip_map(a, la, b, lb, |x, y| x + y),
        BinaryOp::Sub => zip_map(a, la, b, lb, |x, y| x - y),
        BinaryOp::Mul => zip_map(a, la, b, lb, |x, y| x * y),
        BinaryOp::Div => zip_map(a, la, b, lb, |x, y| x / y),
        BinaryOp::Pow => zip_map(a, la, b, lb, |x, y| x.powf(y)),
    }
}

pub(super) fn compare<T: Copy + PartialOrd + Sync>(
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
    op: CompareOp,
) -> Vec<bool> {
    match op {
        CompareOp::Eq => zip_map(a, la, b, lb, |x, y| x == y),
        CompareOp::Ne => zip_map(a, la, b, lb, |x, y| x != y),
        CompareOp::Lt => zip_map(a, la, b, lb, |x, y| x < y),
        CompareOp::Le => zip_map(a, la, b, lb, |x, y| x <= y),
        CompareOp::Gt => zip_map(a, la, b, lb, |x, y| x > y),
        CompareOp::Ge => zip_map(a, la, b, lb, |x, y| x >= y),
    }
}

/// `c ? t : f` per element, each operand viewed with the output's dims.
pub(super) fn select<T: Copy + Sync + Send + Default + 'static>(
    c: (&[bool], &Layout),
    t: (&[T], &Layout),
    f: (&[T], &Layout),
) -> Vec<T> {
    // A branch broadcast from one value (relu's gradient against zero, `masked_fill`)
    // joins a two-operand loop as a constant: that loop runs contiguous operands as
    // one vectorised slice, the three-operand one walks rows with index arithmetic.
    let constant =
        |(v, l): (&[T], &Layout)| l.strides().iter().all(|&s| s == 0).then(|| v[l.offset()]);
    match (constant(t), constant(f)) {
        (_, Some(f)) => zip_map(c.0, c.1, t.0, t.1, |c, t| if c { t } else { f }),
        (Some(t), None) => zip_map(c.0, c.1, f.0, f.1, |c, f| if c { t } else { f }),
        (None, None) => zip3_map(c, t, f, |c, t, f| if c { t } else { f }),
    }
}

/// The elements of the view converted to `T` (through `f64`: exact for every dtype pair
/// rumus has, float to integer truncating toward zero).
pub(super) fn convert<S: Element + Default, T: Element + Default>(
    data: &[S],
    layout: &Layout,
) -> Vec<T> {
    map(data, layout, |x: S| T::from_f64(x.to_f64()))
}
