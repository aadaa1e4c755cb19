//! Explicit f32 vectors for the few loops the compiler does not vectorise well by itself
//! (register-tiled convolution). The default x86-64 target has neither AVX2 nor FMA, so these
//! loops are compiled once per instruction set inside `#[target_feature]` functions and picked
//! at run time ([`Isa::detect`]).
//!
//! Kernels are written once, generic over [`Lanes`], and marked `#[inline(always)]` so they
//! are compiled inside the caller's `#[target_feature]` function, where the intrinsics below
//! inline into plain vector instructions.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// The vector instruction sets with a register-tiled kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// 16 lanes, 32 registers.
    Avx512,
    /// 8 lanes, 16 registers, fused multiply-add.
    Avx2,
}

impl Isa {
    /// The widest instruction set this CPU runs, if any has a kernel.
    pub fn detect() -> Option<Isa> {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx512f") {
                return Some(Isa::Avx512);
            }
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return Some(Isa::Avx2);
            }
        }
        None
    }

    /// Every instruction set this CPU runs (tests compare them all against a plain loop).
    pub fn available() -> Vec<Isa> {
        match Isa::detect() {
            Some(Isa::Avx512) => vec![Isa::Avx512, Isa::Avx2],
            Some(Isa::Avx2) => vec![Isa::Avx2],
            None => Vec::new(),
        }
    }
}

/// Defines `fn $name<T: $bound>(args)` that runs `$plain(args)` compiled for the widest
/// instruction set this CPU has (AVX-512, AVX2, else the default target). For loops the
/// compiler vectorises by itself once it may use wider registers and per-lane shifts and
/// multiplies, which the default x86-64 target (SSE2) lacks. `$plain` should be
/// `#[inline(always)]` so it is compiled inside each `#[target_feature]` copy.
macro_rules! widest_isa {
    ($(#[$doc:meta])* fn $name:ident<$T:ident: $bound:path>($($arg:ident: $ty:ty),* $(,)?) => $plain:ident) => {
        $(#[$doc])*
        fn $name<$T: $bound>($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                unsafe fn avx512<$T: $bound>($($arg: $ty),*) {
                    $plain::<$T>($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn avx2<$T: $bound>($($arg: $ty),*) {
                    $plain::<$T>($($arg),*)
                }
                match $crate::backend::cpu::simd::Isa::detect() {
                    // SAFETY: `Isa::detect` found the instruction set on this CPU.
                    Some($crate::backend::cpu::simd::Isa::Avx512) => return unsafe { avx512::<$T>($($arg),*) },
                    Some($crate::backend::cpu::simd::Isa::Avx2) => return unsafe { avx2::<$T>($($arg),*) },
                    None => {}
                }
            }
            $plain::<$T>($($arg),*)
        }
    };
}
pub(crate) use widest_isa;

/// A vector of `WIDTH` f32 lanes. Every method is only sound on a CPU with the vector's
/// instruction set, and pointers must be valid for `WIDTH` elements.
pub trait Lanes: Copy {
    /// Number of f32 lanes in the vector.
    const WIDTH: usize;
    /// # Safety
    /// The CPU supports the instruction set.
    unsafe fn zero() -> Self;
    /// # Safety
    /// The CPU supports the instruction set.
    unsafe fn splat(x: f32) -> Self;
    /// # Safety
    /// `p` is valid for reading `WIDTH` elements (no alignment needed).
    unsafe fn load(p: *const f32) -> Self;
    /// # Safety
    /// `p` is valid for writing `WIDTH` elements (no alignment needed).
    unsafe fn store(self, p: *mut f32);
    /// `self * b + c`, rounded once.
    ///
    /// # Safety
    /// The CPU supports the instruction set.
    unsafe fn mul_add(self, b: Self, c: Self) -> Self;
    /// The sum of the lanes.
    ///
    /// # Safety
    /// The CPU supports the instruction set.
    unsafe fn sum(self) -> f32;
}

/// Sixteen f32 lanes in an AVX-512 register.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub struct F32x16(__m512);

#[cfg(target_arch = "x86_64")]
impl Lanes for F32x16 {
    const WIDTH: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> Self {
        unsafe { F32x16(_mm512_setzero_ps()) }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        unsafe { F32x16(_mm512_set1_ps(x)) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        unsafe { F32x16(_mm512_loadu_ps(p)) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        unsafe { _mm512_storeu_ps(p, self.0) }
    }
    #[inline(always)]
    unsafe fn mul_add(self, b: Self, c: Self) -> Self {
        unsafe { F32x16(_mm512_fmadd_ps(self.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn sum(self) -> f32 {
        unsafe { _mm512_reduce_add_ps(self.0) }
    }
}

/// Eight f32 lanes in an AVX2 register (with FMA).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub struct F32x8(__m256);

#[cfg(target_arch = "x86_64")]
impl Lanes for F32x8 {
    const WIDTH: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> Self {
        unsafe { F32x8(_mm256_setzero_ps()) }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        unsafe { F32x8(_mm256_set1_ps(x)) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        unsafe { F32x8(_mm256_loadu_ps(p)) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        unsafe { _mm256_storeu_ps(p, self.0) }
    }
    #[inline(always)]
    unsafe fn mul_add(self, b: Self, c: Self) -> Self {
        unsafe { F32x8(_mm256_fmadd_ps(self.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn sum(self) -> f32 {
        unsafe {
            let halves = _mm_add_ps(
                _mm256_castps256_ps128(self.0),
                _mm256_extractf128_ps(self.0, 1),
            );
            let pairs = _mm_add_ps(halves, _mm_movehl_ps(halves, halves));
            let one = _mm_add_ss(pairs, _mm_shuffle_ps(pairs, pairs, 1));
            _mm_cvtss_f32(one)
        }
    }
}
