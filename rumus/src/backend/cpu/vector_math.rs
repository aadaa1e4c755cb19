//! f32 `exp`, `erf` and the activations built on them (sigmoid, SiLU, tanh, GELU and
//! tanh-GELU),
//! forward and backward, as branch-free polynomial code the compiler vectorises: compiled per
//! instruction set by [`widest_isa!`], 16 lanes on AVX-512. The scalar `libm` calls these
//! replace cost 8-25 ns an element; ONNX models spend much of their time in them.
//!
//! How each is computed, and its accuracy (maximum error against the correctly rounded
//! value, in units in the last place of the f32 result, where that is a normal number;
//! measured against `f64` and `libm` over every 7th f32 bit pattern and a grid of [-30, 30],
//! the tests check every 1021st):
//!
//! - `exp`: `x = n ln 2 + r` with `|r| <= ln 2 / 2` (ln 2 split in two so `n ln 2` is
//!   exact), `e^r` a degree-7 polynomial fitted to relative error 2.2e-10, scaled by `2^n`
//!   in two halves so results that are subnormal round once. At most 2 ulp (1.25 measured);
//!   0 below `-103.97`, infinity above `88.72`, NaN for NaN.
//! - `erf(x)`: `x P(x^2)` below `|x| = 0.75` (the polynomial GELU uses), above it
//!   `1 - erfc(|x|)` from GELU's fit of `erfc`: at most 3 ulp (ONNX exports of GELU compute
//!   `erf` on its own).
//! - `sigmoid(x)`: `1 / (1 + e)` or `e / (1 + e)` with `e = exp(-|x|)`, so neither tail
//!   cancels: at most 3.5 ulp (2.98 measured). `silu(x) = x sigmoid(x)`: at most 4 ulp
//!   (3.66) down to x = -87, below which the sigmoid is subnormal and the result (under
//!   1e-36) is off by less than the smallest normal f32.
//! - `tanh(x)`: below `|x| = 0.625` an odd polynomial `x + x^3 Q(x^2)` (fitted to 6e-12),
//!   above it `1 - 2 / (exp(2|x|) + 1)`: at most 2 ulp (1.36).
//! - GELU `x Φ(x) = x erfc(-x/√2) / 2`: `erfc(t) = u exp(-t^2 + g(u))` with
//!   `u = 1 / (1 + t/2)` and `g` a degree-10 polynomial fitted over `t` in `[0, 10]`
//!   (relative error 2.4e-8); `t^2 = x^2 / 2` is split into an exact high part and a small
//!   low part so the rounding of `t` is not magnified by the steep `exp`. One formula for
//!   both signs (`2 - erfc(t)` above zero), so the negative tail keeps its relative accuracy;
//!   below `|t| = 0.75`, `1 + erf(t)` with `erf(t) = t P(t^2)` (fitted to 3e-11). At most
//!   8 ulp (7.63, in the far negative tail; under 6.3 above x = -10).
//! - tanh-GELU `x (1 + tanh y) / 2 = x sigmoid(2y)`, `y = √(2/π) (x + 0.044715 x^3)`: at most
//!   8 ulp above x = -2; below, the f32 rounding of `2y` (as in any f32 evaluation of the
//!   formula) is magnified by the sigmoid's slope, and the relative error stays below
//!   `(8 + 2 |2y|)` f32 epsilons.
//!
//! Gradients use the same pieces written without cancellation (`sigmoid'(x)` as
//! `e / (1 + e)^2`, `tanh'(x)` as `4e / (1 + e)^2` above 0.625); the tests bound them by a
//! relative error of 2e-6, plus 1e-7 absolute for the slopes of SiLU and the GELUs, which
//! cross zero. Every result in the subnormal range is off by less than the smallest normal.

use super::parallel::{PARALLEL_GRAIN, for_each_row};
use super::simd::widest_isa;
use crate::backend::kinds::{GELU_TANH_COEF, SQRT_2_OVER_PI, UnaryOp};

/// Below this `exp` is 0 (under half the smallest subnormal).
const EXP_MIN_INPUT: f32 = -104.0;
/// Above this `exp` is infinite (`n` = 128).
const EXP_MAX_INPUT: f32 = 88.8;
/// `1.5 * 2^23`: adding it rounds a float below 2^22 in magnitude to an integer, which is
/// then the low bits of the sum's representation.
const ROUNDER: f32 = 12_582_912.0;
/// `ln 2` in two parts: the first has 9 significant bits, so `n * LN2_HIGH` is exact.
const LN2_HIGH: f32 = 0.693_359_4;
const LN2_LOW: f32 = -2.121_944_4e-4;
/// `(e^r - 1 - r) / r^2` on `[-ln 2 / 2, ln 2 / 2]`, lowest power first.
const EXP_POLY: [f32; 6] = [
    0.5,
    0.166_666_67,
    0.041_666_465,
    0.008_333_298,
    0.001_393_364_4,
    0.000_198_992_77,
];
/// Where tanh switches from its polynomial to the `exp` form.
const TANH_SMALL: f32 = 0.625;
/// `(tanh(x) - x) / x^3` as a polynomial in `x^2` on `[0, 0.625^2]`.
const TANH_POLY: [f32; 7] = [
    -0.333_333_33,
    0.133_333_25,
    -0.053_966_433,
    0.021_850_154,
    -0.008_751_771,
    0.003_229_218_4,
    -0.000_803_470_2,
];
/// `g` of `erfc(t) = u exp(-t^2 + g)`, `u = 1 / (1 + t / 2)`, as a polynomial in
/// `v = (u - 7/12) / (5/12)`, which spans [-1, 1] over `t` in [0, 10].
const ERFC_POLY: [f32; 11] = [
    -0.558_595_36,
    0.570_307_14,
    0.015_745_232,
    -0.029_470_664,
    -0.001_046_896,
    0.003_708_789,
    -0.000_271_972_5,
    -0.000_536_240_75,
    0.000_125_072_19,
    5.578_604_8e-5,
    -2.084_878_7e-5,
];
/// Below this `|x| / √2`, `erf` is the polynomial [`ERF_POLY`] (no cancellation in
/// `2 - erfc`).
const ERF_SMALL: f32 = 0.75;
/// `erf(z) / z` as a polynomial in `z^2` on `[0, 0.75^2]`.
const ERF_POLY: [f32; 7] = [
    std::f32::consts::FRAC_2_SQRT_PI,
    -0.376_126_38,
    0.112_837_78,
    -0.026_864_78,
    0.005_216_816_4,
    -0.000_835_735_35,
    9.472_982e-5,
];
/// Beyond this |x| GELU is `x` (or `-0`): `erfc(15 / √2)` is below 1e-50.
const GELU_SATURATED: f32 = 15.0;
const FRAC_1_SQRT_2PI: f32 = 0.398_942_3;

/// The polynomial with `coefficients` (lowest power first) at `x`, in fused multiply-adds:
/// single instructions in the AVX2 and AVX-512 copies (both have FMA), a correctly rounded
/// `libm` call in the plain one, so every copy gives the same bits.
#[inline(always)]
fn horner<const N: usize>(coefficients: &[f32; N], x: f32) -> f32 {
    let mut sum = coefficients[N - 1];
    for &c in coefficients[..N - 1].iter().rev() {
        sum = sum.mul_add(x, c);
    }
    sum
}

/// `2^n` for `n` in -126..=127.
#[inline(always)]
fn pow2(n: i32) -> f32 {
    f32::from_bits(((n + 127) as u32) << 23)
}

/// `e^x` (see the module docs for its accuracy).
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    let x = x.clamp(EXP_MIN_INPUT, EXP_MAX_INPUT);
    let shifted = x * std::f32::consts::LOG2_E + ROUNDER;
    let n = shifted - ROUNDER;
    let r = (x - n * LN2_HIGH) - n * LN2_LOW;
    let p = 1.0 + (r * r).mul_add(horner(&EXP_POLY, r), r);
    // The integer `n` is in the low bits of `shifted` (whose ulp is 1).
    let n = shifted.to_bits() as i32 - ROUNDER.to_bits() as i32;
    let half = n >> 1;
    p * pow2(half) * pow2(n - half)
}

/// `exp(-|x|)` and `1 / (1 + exp(-|x|))`, the two parts of a sigmoid that never cancels.
#[inline(always)]
fn sigmoid_parts(x: f32) -> (f32, f32) {
    let e = exp(-x.abs());
    (e, 1.0 / (1.0 + e))
}

#[inline(always)]
fn sigmoid(x: f32) -> f32 {
    let (e, p) = sigmoid_parts(x);
    if x >= 0.0 { p } else { e * p }
}

/// `sigmoid'(x) = sigmoid(x) sigmoid(-x) = e / (1 + e)^2`.
#[inline(always)]
fn sigmoid_slope(x: f32) -> f32 {
    let (e, p) = sigmoid_parts(x);
    e * p * p
}

#[inline(always)]
fn tanh(x: f32) -> f32 {
    let a = x.abs();
    let small = x + x * a * a * horner(&TANH_POLY, a * a);
    let large = (1.0 - 2.0 / (exp(2.0 * a) + 1.0)).copysign(x);
    if a < TANH_SMALL { small } else { large }
}

/// `1 - tanh(x)^2`, as `4e / (1 + e)^2` with `e = exp(-2|x|)` where tanh is near 1.
#[inline(always)]
fn tanh_slope(x: f32) -> f32 {
    let t = tanh(x);
    let e = exp(-2.0 * x.abs());
    let p = 1.0 / (1.0 + e);
    if x.abs() < TANH_SMALL {
        1.0 - t * t
    } else {
        4.0 * e * p * p
    }
}

/// `exp(-x^2 / 2)` as two factors, `exp(-xh^2 / 2)` (exact argument) and `exp` of the
/// small rest, and `u`, `g(u)` of `erfc(|x| / √2) = u exp(-x^2 / 2) exp(g)`.
#[inline(always)]
fn erfc_parts(x: f32) -> (f32, f32, f32, f32) {
    // `xh` keeps 12 significant bits, so `xh * xh` is exact.
    let high = f32::from_bits(x.to_bits() & 0xFFFF_F000);
    let low = x - high;
    let gauss_high = exp(-0.5 * (high * high));
    let rest = -0.5 * ((2.0 * high + low) * low);
    let t = x.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let u = 1.0 / (1.0 + 0.5 * t);
    let g = horner(&ERFC_POLY, (u - 7.0 / 12.0) * 2.4);
    (gauss_high, rest, u, g)
}

/// `2 Φ(x) = erfc(-x / √2)` given `tail = erfc(|x| / √2)`: `1 + erf` near zero.
#[inline(always)]
fn twice_normal_cdf_from(x: f32, tail: f32) -> f32 {
    let z = x * std::f32::consts::FRAC_1_SQRT_2;
    let near_zero = 1.0 + z * horner(&ERF_POLY, z * z);
    if z.abs() < ERF_SMALL {
        near_zero
    } else if x >= 0.0 {
        2.0 - tail
    } else {
        tail
    }
}

/// `erf(x)`: `x P(x^2)` below `|x| = 0.75`, else `1 - erfc(|x|)` with its sign, `erfc`
/// from the same fit as GELU's (its relative error matters little there: `erfc(0.75)` is
/// 0.29 and falls fast).
#[inline(always)]
fn erf(x: f32) -> f32 {
    let t = x.abs();
    let near_zero = x * horner(&ERF_POLY, x * x);
    let u = 1.0 / (1.0 + 0.5 * t);
    let g = horner(&ERFC_POLY, (u - 7.0 / 12.0) * 2.4);
    let far = (1.0 - u * exp(g - t * t)).copysign(x);
    if t < ERF_SMALL { near_zero } else { far }
}

/// `erf'(x) = 2 / √π exp(-x^2)`, `x^2` split as in [`erfc_parts`].
#[inline(always)]
fn erf_slope(x: f32) -> f32 {
    let high = f32::from_bits(x.to_bits() & 0xFFFF_F000);
    let low = x - high;
    std::f32::consts::FRAC_2_SQRT_PI * exp(-(high * high)) * exp(-((2.0 * high + low) * low))
}

/// `2 Φ(x) = erfc(-x / √2)`.
#[inline(always)]
fn twice_normal_cdf(x: f32) -> f32 {
    let (gauss_high, rest, u, g) = erfc_parts(x);
    twice_normal_cdf_from(x, u * gauss_high * exp(rest + g))
}

#[inline(always)]
fn gelu(x: f32) -> f32 {
    let inside = 0.5 * x * twice_normal_cdf(x);
    if x.abs() <= GELU_SATURATED {
        inside
    } else if x > 0.0 {
        x
    } else {
        // -0 for finite x, NaN for -inf (0 * inf), as the f64 formula gives.
        x * 0.0
    }
}

/// `GELU'(x) = Φ(x) + x φ(x)`.
#[inline(always)]
fn gelu_slope(x: f32) -> f32 {
    let (gauss_high, rest, u, g) = erfc_parts(x);
    let gauss = gauss_high * exp(rest);
    let cdf = 0.5 * twice_normal_cdf_from(x, u * gauss * exp(g));
    let slope = cdf + x * FRAC_1_SQRT_2PI * gauss;
    if x.abs() <= GELU_SATURATED {
        slope
    } else if x > 0.0 {
        1.0
    } else {
        0.0
    }
}

/// `2y` of tanh-GELU's `x sigmoid(2y)`.
#[inline(always)]
fn gelu_tanh_argument(x: f32) -> f32 {
    const K: f32 = SQRT_2_OVER_PI as f32;
    const C: f32 = GELU_TANH_COEF as f32;
    2.0 * K * (x + C * x * x * x)
}

#[inline(always)]
fn gelu_tanh(x: f32) -> f32 {
    x * sigmoid(gelu_tanh_argument(x))
}

/// `d/dx [x sigmoid(2y)] = sigmoid(2y) + x sigmoid'(2y) 2y'`.
#[inline(always)]
fn gelu_tanh_slope(x: f32) -> f32 {
    const K: f32 = SQRT_2_OVER_PI as f32;
    const C3: f32 = 3.0 * GELU_TANH_COEF as f32;
    let z = gelu_tanh_argument(x);
    let slope = x * sigmoid_slope(z) * (2.0 * K * (1.0 + C3 * x * x));
    // (x * 0 where the slope underflows; not inf * 0 for huge x)
    sigmoid(z) + if slope.is_finite() { slope } else { 0.0 }
}

/// One vectorised activation: its value and its derivative.
trait Activation {
    fn value(x: f32) -> f32;
    fn slope(x: f32) -> f32;
}

macro_rules! activation {
    ($name:ident, $value:expr, $slope:expr) => {
        struct $name;
        impl Activation for $name {
            #[inline(always)]
            fn value(x: f32) -> f32 {
                $value(x)
            }
            #[inline(always)]
            fn slope(x: f32) -> f32 {
                $slope(x)
            }
        }
    };
}

activation!(Exp, exp, exp);
activation!(Erf, erf, erf_slope);
activation!(Sigmoid, sigmoid, sigmoid_slope);
activation!(Silu, |x: f32| x * sigmoid(x), |x: f32| {
    let (e, p) = sigmoid_parts(x);
    let (s, s_neg) = if x >= 0.0 { (p, e * p) } else { (e * p, p) };
    s * (1.0 + x * s_neg)
});
activation!(Tanh, tanh, tanh_slope);
activation!(Gelu, gelu, gelu_slope);
activation!(GeluTanh, gelu_tanh, gelu_tanh_slope);

#[inline(always)]
fn values_plain<A: Activation>(src: &[f32], dst: &mut [f32]) {
    for (d, &x) in dst.iter_mut().zip(src) {
        *d = A::value(x);
    }
}

#[inline(always)]
fn gradients_plain<A: Activation>(grad: &[f32], x: &[f32], dst: &mut [f32]) {
    for ((d, &g), &x) in dst.iter_mut().zip(grad).zip(x) {
        *d = g * A::slope(x);
    }
}

widest_isa! {
    /// `dst[i] = A(src[i])`.
    fn values<A: Activation>(src: &[f32], dst: &mut [f32]) => values_plain
}

widest_isa! {
    /// `dst[i] = grad[i] * A'(x[i])`.
    fn gradients<A: Activation>(grad: &[f32], x: &[f32], dst: &mut [f32]) => gradients_plain
}

/// `op` of every element of `src`, if `op` has a vectorised kernel.
pub(super) fn forward(op: UnaryOp, src: &[f32]) -> Option<Vec<f32>> {
    Some(match op {
        UnaryOp::Exp => each::<Exp>(src),
        UnaryOp::Erf => each::<Erf>(src),
        UnaryOp::Sigmoid => each::<Sigmoid>(src),
        UnaryOp::Silu => each::<Silu>(src),
        UnaryOp::Tanh => each::<Tanh>(src),
        UnaryOp::Gelu => each::<Gelu>(src),
        UnaryOp::GeluTanh => each::<GeluTanh>(src),
        _ => return None,
    })
}

/// `grad * op'(x)` of every element, if `op` has a vectorised kernel.
pub(super) fn backward(op: UnaryOp, grad: &[f32], x: &[f32]) -> Option<Vec<f32>> {
    Some(match op {
        UnaryOp::Sigmoid => each_gradient::<Sigmoid>(grad, x),
        UnaryOp::Silu => each_gradient::<Silu>(grad, x),
        UnaryOp::Tanh => each_gradient::<Tanh>(grad, x),
        UnaryOp::Gelu => each_gradient::<Gelu>(grad, x),
        UnaryOp::GeluTanh => each_gradient::<GeluTanh>(grad, x),
        _ => return None,
    })
}

/// The output buffer of `len` elements: as `strided::map` takes it, from this thread's
/// shelf of small buffers below the parallel grain, else from the pool.
fn output(len: usize) -> Vec<f32> {
    if len < PARALLEL_GRAIN {
        let mut out = super::small_buffers::with_capacity(len);
        out.resize(len, 0.0);
        return out;
    }
    super::pool::reused(len, 0.0f32)
}

fn each<A: Activation>(src: &[f32]) -> Vec<f32> {
    let mut out = output(src.len());
    let chunk = PARALLEL_GRAIN.min(src.len().max(1));
    for_each_row(&mut out, chunk, |row, dst| {
        values::<A>(&src[row * chunk..row * chunk + dst.len()], dst);
    });
    out
}

fn each_gradient<A: Activation>(grad: &[f32], x: &[f32]) -> Vec<f32> {
    let mut out = output(x.len());
    let chunk = PARALLEL_GRAIN.min(x.len().max(1));
    for_each_row(&mut out, chunk, |row, dst| {
        let range = row * chunk..row * chunk + dst.len();
        gradients::<A>(&grad[range.clone()], &x[range], dst);
    });
    out
}

#[cfg(test)]
mod tests {
    //! Accuracy against f64 (and `libm`'s `erfc`), in ulps of the f32 result.

    use super::*;

    /// Distance in ulps between `actual` and the f64 `truth` rounded to f32 (the rounding
    /// itself counted as half an ulp at most); NaN only against NaN, infinities exactly. A
    /// subnormal truth only needs an absolute error below the smallest normal f32 (0 where
    /// it is met).
    fn ulps(actual: f32, truth: f64) -> f64 {
        if truth.is_nan() {
            return if actual.is_nan() { 0.0 } else { f64::INFINITY };
        }
        let rounded = truth as f32;
        if rounded != 0.0 && rounded.is_subnormal() {
            let off = (actual as f64 - truth).abs() >= f32::MIN_POSITIVE as f64;
            return if off { f64::INFINITY } else { 0.0 };
        }
        if rounded.is_infinite() || actual.is_infinite() {
            return if actual == rounded {
                0.0
            } else {
                f64::INFINITY
            };
        }
        // The ulp at the truth's magnitude, subnormal spacing at least.
        let ulp = if rounded == 0.0 {
            f32::from_bits(1) as f64
        } else {
            let bits = rounded.abs().to_bits();
            (f32::from_bits(bits + 1) as f64 - rounded.abs() as f64).max(f32::from_bits(1) as f64)
        };
        (actual as f64 - truth).abs() / ulp
    }

    /// Every 1021st bit pattern of f32 (both signs, all exponents) and a grid of [-30, 30].
    fn inputs() -> impl Iterator<Item = f32> {
        const STEP: u32 = 1021;
        let patterns = (0..u32::MAX / STEP).map(|i| f32::from_bits(i * STEP));
        let grid = (-300_000..=300_000).map(|i| i as f32 * 1e-4);
        patterns
            .chain(grid)
            .chain([0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN])
    }

    /// The largest error of `f` against `truth` over [`inputs`] where `within` holds.
    fn worst(f: fn(f32) -> f32, truth: fn(f64) -> f64, within: fn(f32) -> bool) -> (f64, f32) {
        let mut worst = (0.0, 0.0);
        for x in inputs().filter(|&x| within(x)) {
            let error = ulps(f(x), truth(x as f64));
            if error > worst.0 || error.is_nan() {
                worst = (error, x);
            }
        }
        worst
    }

    fn sigmoid64(x: f64) -> f64 {
        if x >= 0.0 {
            1.0 / (1.0 + (-x).exp())
        } else {
            x.exp() / (1.0 + x.exp())
        }
    }

    fn gelu64(x: f64) -> f64 {
        0.5 * x * libm::erfc(-x / std::f64::consts::SQRT_2)
    }

    fn gelu_tanh64(x: f64) -> f64 {
        let y = SQRT_2_OVER_PI * (x + GELU_TANH_COEF * x * x * x);
        x * sigmoid64(2.0 * y)
    }

    #[test]
    fn the_values_are_within_their_documented_ulps() {
        let everywhere = |_: f32| true;
        // SiLU's sigmoid is subnormal below -87 (see the module docs).
        let silu_normal = |x: f32| x >= -87.0 || x.is_nan();
        type Bound = (
            &'static str,
            fn(f32) -> f32,
            fn(f64) -> f64,
            f64,
            fn(f32) -> bool,
        );
        let bounds: [Bound; 7] = [
            ("exp", exp, f64::exp, 2.0, everywhere),
            ("erf", erf, libm::erf, 3.0, everywhere),
            ("sigmoid", sigmoid, sigmoid64, 3.5, everywhere),
            ("silu", Silu::value, |x| x * sigmoid64(x), 4.0, silu_normal),
            ("tanh", tanh, f64::tanh, 2.0, everywhere),
            ("gelu", gelu, gelu64, 8.0, everywhere),
            ("gelu_tanh", gelu_tanh, gelu_tanh64, 8.0, |x: f32| {
                x >= -2.0 || x.is_nan()
            }),
        ];
        for x in inputs().filter(|&x| x.is_finite() && x < -87.0) {
            let error = (Silu::value(x) as f64 - x as f64 * sigmoid64(x as f64)).abs();
            assert!(
                error < f32::MIN_POSITIVE as f64,
                "silu at {x}: off by {error:e}"
            );
        }
        // tanh-GELU below -2: the rounding of its argument 2y, magnified by the sigmoid.
        for x in inputs().filter(|&x| x.is_finite() && x < -2.0) {
            let truth = gelu_tanh64(x as f64);
            let argument = 2.0 * SQRT_2_OVER_PI * (x as f64 + GELU_TANH_COEF * (x as f64).powi(3));
            let bound = (8.0 + 2.0 * argument.abs()) * f32::EPSILON as f64;
            let error = (gelu_tanh(x) as f64 - truth).abs();
            assert!(
                error <= bound * truth.abs() || error < f32::MIN_POSITIVE as f64,
                "gelu_tanh at {x}: {} against {truth}",
                gelu_tanh(x)
            );
        }
        for (name, f, truth, bound, within) in bounds {
            let (error, at) = worst(f, truth, within);
            assert!(
                error <= bound,
                "{name}: {error:.2} ulp at {at:e} ({} against {})",
                f(at),
                truth(at as f64)
            );
        }
    }

    #[test]
    fn the_slopes_are_within_two_millionths() {
        // (slope, truth, an absolute floor for slopes that cross zero, where the relative
        // error of any formula is unbounded)
        type Slope = (&'static str, fn(f32) -> f32, fn(f64) -> f64, f64);
        let slopes: [Slope; 6] = [
            (
                "erf",
                erf_slope,
                |x| std::f64::consts::FRAC_2_SQRT_PI * (-x * x).exp(),
                0.0,
            ),
            (
                "sigmoid",
                sigmoid_slope,
                |x| sigmoid64(x) * sigmoid64(-x),
                0.0,
            ),
            (
                "silu",
                Silu::slope,
                |x| sigmoid64(x) * (1.0 + x * sigmoid64(-x)),
                1e-7,
            ),
            ("tanh", tanh_slope, |x| 1.0 / x.cosh().powi(2), 0.0),
            (
                "gelu",
                gelu_slope,
                |x| {
                    0.5 * libm::erfc(-x / std::f64::consts::SQRT_2)
                        + x * (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt()
                },
                1e-7,
            ),
            (
                "gelu_tanh",
                gelu_tanh_slope,
                |x| {
                    let z = 2.0 * SQRT_2_OVER_PI * (x + GELU_TANH_COEF * x * x * x);
                    let dz = 2.0 * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_TANH_COEF * x * x);
                    sigmoid64(z) + x * sigmoid64(z) * sigmoid64(-z) * dz
                },
                1e-7,
            ),
        ];
        for (name, f, truth, floor) in slopes {
            for x in (-300_000..=300_000).map(|i| i as f32 * 1e-4) {
                let (actual, expected) = (f(x) as f64, truth(x as f64));
                let bound = 2e-6 * expected.abs() + floor + f32::MIN_POSITIVE as f64;
                assert!(
                    (actual - expected).abs() <= bound,
                    "{name}' at {x}: {actual} against {expected}"
                );
            }
        }
    }

    #[test]
    fn the_vector_kernels_give_the_scalar_values() {
        let x: Vec<f32> = (0..100_003).map(|i| (i as f32 - 50_000.0) * 3e-4).collect();
        let grad: Vec<f32> = (0..x.len()).map(|i| 1.0 + (i % 7) as f32).collect();
        let ops = [
            UnaryOp::Exp,
            UnaryOp::Erf,
            UnaryOp::Sigmoid,
            UnaryOp::Silu,
            UnaryOp::Tanh,
            UnaryOp::Gelu,
            UnaryOp::GeluTanh,
        ];
        for op in ops {
            let values = forward(op, &x).unwrap();
            let gradients = backward(op, &grad, &x);
            for (i, &xi) in x.iter().enumerate() {
                let scalar = match op {
                    UnaryOp::Exp => Exp::value(xi),
                    UnaryOp::Erf => Erf::value(xi),
                    UnaryOp::Sigmoid => Sigmoid::value(xi),
                    UnaryOp::Silu => Silu::value(xi),
                    UnaryOp::Tanh => Tanh::value(xi),
                    UnaryOp::Gelu => Gelu::value(xi),
                    _ => GeluTanh::value(xi),
                };
                assert_eq!(values[i].to_bits(), scalar.to_bits(), "{op:?} at {xi}");
                if let Some(g) = &gradients {
                    assert!(g[i].is_finite(), "{op:?}' at {xi}");
                }
            }
        }
    }
}
