//! Rust types that can live in a tensor, and the extra arithmetic kernels need from floats.

use crate::backend::cpu::CpuBuffer;
use crate::dtype::DType;

/// A Rust scalar type that maps to one [`DType`].
pub trait Element: Copy + Default + Send + Sync + PartialOrd + std::fmt::Debug + 'static {
    /// The dtype tag of this type.
    const DTYPE: DType;
    /// Wraps `values` in the [`CpuBuffer`] variant of this type, without copying.
    fn into_buffer(values: Vec<Self>) -> CpuBuffer;
    /// The buffer's elements, or `None` if the buffer holds another dtype.
    fn slice(buffer: &CpuBuffer) -> Option<&[Self]>;
    /// The buffer's elements, mutably, or `None` if the buffer holds another dtype.
    fn slice_mut(buffer: &mut CpuBuffer) -> Option<&mut [Self]>;
    /// Converts to `f64` (`bool` gives 0 or 1).
    fn to_f64(self) -> f64;
    /// Converts from `f64` with an `as` cast (`i64` truncates; `bool` is `value != 0`).
    fn from_f64(value: f64) -> Self;
}

macro_rules! impl_element {
    ($ty:ty, $dtype:ident, $to:expr, $from:expr) => {
        impl Element for $ty {
            const DTYPE: DType = DType::$dtype;
            fn into_buffer(values: Vec<Self>) -> CpuBuffer {
                CpuBuffer::$dtype(values)
            }
            fn slice(buffer: &CpuBuffer) -> Option<&[Self]> {
                match buffer {
                    CpuBuffer::$dtype(v) => Some(v),
                    _ => None,
                }
            }
            fn slice_mut(buffer: &mut CpuBuffer) -> Option<&mut [Self]> {
                match buffer {
                    CpuBuffer::$dtype(v) => Some(v),
                    _ => None,
                }
            }
            fn to_f64(self) -> f64 {
                ($to)(self)
            }
            fn from_f64(value: f64) -> Self {
                ($from)(value)
            }
        }
    };
}

impl_element!(f32, F32, |v: f32| v as f64, |v: f64| v as f32);
impl_element!(f64, F64, |v: f64| v, |v: f64| v);
impl_element!(
    half::f16,
    F16,
    |v: half::f16| v.to_f64(),
    half::f16::from_f64
);
impl_element!(
    half::bf16,
    BF16,
    |v: half::bf16| v.to_f64(),
    half::bf16::from_f64
);
impl_element!(i64, I64, |v: i64| v as f64, |v: f64| v as i64);
impl_element!(bool, Bool, |v: bool| if v { 1.0 } else { 0.0 }, |v: f64| v
    != 0.0);

/// Floating-point element: the math the kernels call, for `f32` and `f64`.
pub trait Float: Element + num_ops::Arith {
    /// `0.0`.
    const ZERO: Self;
    /// `1.0`.
    const ONE: Self;
    /// Negative infinity, the identity of a max reduction.
    const NEG_INFINITY: Self;
    /// Positive infinity, the identity of a min reduction.
    const INFINITY: Self;
    /// `e^self`.
    fn exp(self) -> Self;
    /// Natural logarithm.
    fn ln(self) -> Self;
    /// Square root.
    fn sqrt(self) -> Self;
    /// Hyperbolic tangent.
    fn tanh(self) -> Self;
    /// Absolute value.
    fn abs(self) -> Self;
    /// The Gauss error function (from `libm`), used by the exact GELU.
    fn erf(self) -> Self;
    /// Sine (radians).
    fn sin(self) -> Self;
    /// Cosine (radians).
    fn cos(self) -> Self;
    /// The largest integer not above `self`.
    fn floor(self) -> Self;
    /// `self` raised to a floating-point power.
    fn powf(self, exponent: Self) -> Self;
    /// The larger of two values; as `f32::max`, a NaN operand yields the other.
    fn max(self, other: Self) -> Self;
    /// The smaller of two values; as `f32::min`, a NaN operand yields the other.
    fn min(self, other: Self) -> Self;
    /// `ln(1 + self)`, accurate for `self` near zero.
    fn ln_1p(self) -> Self;
    /// Whether the value is NaN.
    fn is_nan(self) -> bool;
}

/// The operator bounds kernels need, bundled so they are written once.
pub mod num_ops {
    use std::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub, SubAssign};

    /// Arithmetic and compound-assignment operators on `Self`, implemented for `f32` and
    /// `f64`.
    pub trait Arith:
        Sized
        + Add<Output = Self>
        + Sub<Output = Self>
        + Mul<Output = Self>
        + Div<Output = Self>
        + Neg<Output = Self>
        + AddAssign
        + SubAssign
        + MulAssign
    {
    }
    impl Arith for f32 {}
    impl Arith for f64 {}
}

macro_rules! impl_float {
    ($ty:ty, $erf:path) => {
        impl Float for $ty {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            const NEG_INFINITY: Self = <$ty>::NEG_INFINITY;
            const INFINITY: Self = <$ty>::INFINITY;
            #[inline(always)]
            fn exp(self) -> Self {
                <$ty>::exp(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$ty>::ln(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$ty>::sqrt(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                <$ty>::tanh(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$ty>::abs(self)
            }
            #[inline(always)]
            fn erf(self) -> Self {
                $erf(self)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                <$ty>::sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                <$ty>::cos(self)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                <$ty>::floor(self)
            }
            #[inline(always)]
            fn powf(self, exponent: Self) -> Self {
                <$ty>::powf(self, exponent)
            }
            #[inline(always)]
            fn max(self, other: Self) -> Self {
                <$ty>::max(self, other)
            }
            #[inline(always)]
            fn min(self, other: Self) -> Self {
                <$ty>::min(self, other)
            }
            #[inline(always)]
            fn ln_1p(self) -> Self {
                <$ty>::ln_1p(self)
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$ty>::is_nan(self)
            }
        }
    };
}

impl_float!(f32, libm::erff);
impl_float!(f64, libm::erf);
