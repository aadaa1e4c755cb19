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
impl_element!(half::f16, F16, |v: half::f16| v.to_f64(), f16_from_f64);
impl_element!(half::bf16, BF16, |v: half::bf16| v.to_f64(), bf16_from_f64);

/// `value` as an `f32` rounded toward zero, with the last bit set when that dropped anything
/// ("rounding to odd"). Rounding the result to nearest in a format of at most 22 significant
/// bits gives `value` correctly rounded: the set bit stands for everything dropped, so a
/// value just past a halfway point is never taken for the halfway point itself.
fn f32_rounded_to_odd(value: f64) -> f32 {
    let nearest = value as f32;
    if f64::from(nearest) == value || value.is_nan() {
        return nearest;
    }
    let mut bits = nearest.to_bits();
    if f64::from(nearest).abs() > value.abs() {
        // One step toward zero (from infinity, to the largest finite f32).
        bits -= 1;
    }
    f32::from_bits(bits | 1)
}

/// `value` correctly rounded to `f16` (to nearest, ties to even). `half`'s own conversion
/// from `f64` drops the low 32 bits before rounding (or rounds to `f32` first), so a value
/// just above a halfway point could round down.
pub(crate) fn f16_from_f64(value: f64) -> half::f16 {
    half::f16::from_f32(f32_rounded_to_odd(value))
}

/// `value` correctly rounded to `bf16` (to nearest, ties to even); see [`f16_from_f64`].
pub(crate) fn bf16_from_f64(value: f64) -> half::bf16 {
    half::bf16::from_f32(f32_rounded_to_odd(value))
}
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The correctly rounded 16-bit neighbour of `value`, found by exact comparison in
    /// `f64`: the two candidates around it (every 16-bit value is exact in `f64`, and so is
    /// the distance to a nearby one), the nearer one, the even one on a tie.
    fn nearest<T: Copy>(
        value: f64,
        below: T,
        above: T,
        to_f64: fn(T) -> f64,
        bits: fn(T) -> u16,
    ) -> T {
        let (lo, hi) = (to_f64(below), to_f64(above));
        assert!(lo <= value && value <= hi, "{lo} <= {value} <= {hi}");
        match (value - lo).partial_cmp(&(hi - value)).unwrap() {
            std::cmp::Ordering::Less => below,
            std::cmp::Ordering::Greater => above,
            std::cmp::Ordering::Equal if bits(below).is_multiple_of(2) => below,
            std::cmp::Ordering::Equal => above,
        }
    }

    #[test]
    fn f32_values_round_to_16_bits_as_from_their_own_bits() {
        // From f32 (the usual source), `half`'s f32 conversions see every bit.
        for bits in (0..u32::MAX).step_by(7919) {
            let x = f32::from_bits(bits);
            if x.is_nan() {
                continue;
            }
            let wide = f64::from(x);
            assert_eq!(bf16_from_f64(wide), half::bf16::from_f32(x), "{x:e}");
            assert_eq!(f16_from_f64(wide), half::f16::from_f32(x), "{x:e}");
        }
        // Just past a bf16 halfway point, by 4 units of the f32's last place: rounds up.
        let past_halfway = f32::from_bits(0x3fa6_8004);
        assert_eq!(bf16_from_f64(f64::from(past_halfway)).to_bits(), 0x3fa7);
    }

    #[test]
    fn f64_values_round_to_16_bits_once() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            // Halfway points between neighbouring 16-bit values of [1, 2), nudged by a tiny
            // amount either way or not at all: the cases that rounding twice gets wrong.
            let step = (state >> 33) % 128;
            let nudge = [0.0, 2f64.powi(-40), -(2f64.powi(-40))][(state % 3) as usize];
            let value = 1.0 + (step as f64 + 0.5) / 128.0 + nudge;
            let below = half::bf16::from_f64(1.0 + step as f64 / 128.0);
            let above = half::bf16::from_f64(1.0 + (step + 1) as f64 / 128.0);
            let want = nearest(value, below, above, half::bf16::to_f64, half::bf16::to_bits);
            assert_eq!(bf16_from_f64(value), want, "bf16 of {value:e}");
            let value = 1.0 + (step as f64 + 0.5) / 1024.0 + nudge;
            let below = half::f16::from_f64(1.0 + step as f64 / 1024.0);
            let above = half::f16::from_f64(1.0 + (step + 1) as f64 / 1024.0);
            let want = nearest(value, below, above, half::f16::to_f64, half::f16::to_bits);
            assert_eq!(f16_from_f64(value), want, "f16 of {value:e}");
        }
        assert_eq!(bf16_from_f64(f64::MAX), half::bf16::INFINITY);
        assert_eq!(f16_from_f64(-1e300), half::f16::NEG_INFINITY);
        assert!(bf16_from_f64(f64::NAN).is_nan());
        assert_eq!(bf16_from_f64(1e-300).to_bits(), 0);
    }
}
