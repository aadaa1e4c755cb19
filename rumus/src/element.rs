//! Rust types that can live in a tensor, and the extra arithmetic kernels need from floats.

use crate::dtype::DType;
use crate::storage::CpuBuffer;

/// A Rust scalar type that maps to one [`DType`].
pub trait Element: Copy + Default + Send + Sync + PartialOrd + std::fmt::Debug + 'static {
    const DTYPE: DType;
    fn into_buffer(values: Vec<Self>) -> CpuBuffer;
    fn slice(buffer: &CpuBuffer) -> Option<&[Self]>;
    fn slice_mut(buffer: &mut CpuBuffer) -> Option<&mut [Self]>;
    fn to_f64(self) -> f64;
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
impl_element!(i64, I64, |v: i64| v as f64, |v: f64| v as i64);
impl_element!(bool, Bool, |v: bool| if v { 1.0 } else { 0.0 }, |v: f64| v
    != 0.0);

/// Floating-point element: the math the kernels call, for `f32` and `f64`.
pub trait Float: Element + num_ops::Arith {
    const ZERO: Self;
    const ONE: Self;
    const NEG_INFINITY: Self;
    const INFINITY: Self;
    fn exp(self) -> Self;
    fn ln(self) -> Self;
    fn sqrt(self) -> Self;
    fn tanh(self) -> Self;
    fn abs(self) -> Self;
    fn erf(self) -> Self;
    fn powf(self, exponent: Self) -> Self;
    fn max(self, other: Self) -> Self;
    fn min(self, other: Self) -> Self;
    fn ln_1p(self) -> Self;
    fn is_nan(self) -> bool;
}

/// The operator bounds kernels need, bundled so they are written once.
pub mod num_ops {
    use std::ops::{Add, AddAssign, Div, Mul, MulAssign, Neg, Sub, SubAssign};

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
