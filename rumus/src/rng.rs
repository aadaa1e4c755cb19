//! Random numbers. One seeding API: [`manual_seed`] seeds the process-wide generator that every
//! random constructor and initializer draws from; a [`Generator`] can also be passed
//! explicitly where a separate stream is wanted (data shuffling, dropout).
//!
//! The generator is xoshiro256++ seeded through SplitMix64: fast, small state, and the same
//! sequence on every platform.

use std::sync::Mutex;

use crate::error::{Error, Result};

/// A seeded pseudo-random generator (xoshiro256++).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Generator {
    state: [u64; 4],
    /// Second value of the last Box-Muller pair, as raw bits so the struct stays `Eq`.
    spare_normal: Option<u64>,
}

/// Default seed of the global generator, so runs are reproducible even without a seed.
pub const DEFAULT_SEED: u64 = 0x5EED_2026;

fn splitmix64(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Generator {
    /// A generator whose state is expanded from `seed` with SplitMix64; equal seeds give equal
    /// sequences.
    pub fn new(seed: u64) -> Self {
        let mut x = seed;
        Generator {
            state: std::array::from_fn(|_| splitmix64(&mut x)),
            spare_normal: None,
        }
    }

    /// The complete state: the four xoshiro words and the cached second normal sample (as
    /// bits). Checkpoints store it so a resumed run draws exactly the numbers the
    /// uninterrupted run would have drawn.
    pub fn state(&self) -> ([u64; 4], Option<u64>) {
        (self.state, self.spare_normal)
    }

    /// Rebuilds a generator from [`Generator::state`], refusing states the generator can never
    /// be in, which can only come from a damaged or hand-made checkpoint:
    /// - the all-zero state, which xoshiro would never leave (returning zeros forever). Every
    ///   other state lies on its one cycle of length 2^256 - 1, so every other state is valid;
    /// - a spare normal sample that Box-Muller cannot produce: not finite, or larger in
    ///   magnitude than the radius of the smallest `u1`, 2^-53 (about 8.57).
    pub fn from_state(state: [u64; 4], spare_normal: Option<u64>) -> Result<Self> {
        let refuse = |message: String| Error::InvalidArgument {
            op: "Generator::from_state",
            message,
        };
        if state == [0; 4] {
            return Err(refuse(
                "the state is all zeros, which xoshiro256++ can never leave (it would return \
                 only zeros); take the state from `Generator::state` of a seeded generator"
                    .into(),
            ));
        }
        if let Some(bits) = spare_normal {
            let value = f64::from_bits(bits);
            if !value.is_finite() || value.abs() > max_normal() {
                return Err(refuse(format!(
                    "the spare normal sample is {value} (bits {bits:#018x}); Box-Muller samples \
                     are finite and at most {} in magnitude",
                    max_normal()
                )));
            }
        }
        Ok(Generator {
            state,
            spare_normal,
        })
    }

    /// The next 64 uniformly distributed random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform integer in `0..bound`, without modulo bias.
    ///
    /// # Panics
    /// If `bound` is 0 (the range is empty).
    pub fn below(&mut self, bound: u64) -> u64 {
        assert!(bound > 0, "Generator::below: the range 0..0 is empty");
        let zone = u64::MAX - u64::MAX % bound;
        loop {
            let v = self.next_u64();
            if v < zone {
                return v % bound;
            }
        }
    }

    /// Standard normal sample (Box-Muller; pairs are used fully).
    pub fn next_normal(&mut self) -> f64 {
        if let Some(bits) = self.spare_normal.take() {
            return f64::from_bits(bits);
        }
        let u1 = 1.0 - self.next_f64(); // [2^-53, 1]: ln is finite
        let u2 = self.next_f64();
        let radius = box_muller_radius(u1);
        let angle = std::f64::consts::TAU * u2;
        self.spare_normal = Some((radius * angle.sin()).to_bits());
        radius * angle.cos()
    }

    /// Fisher-Yates shuffle of `0..n`.
    pub fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            order.swap(i, self.below(i as u64 + 1) as usize);
        }
        order
    }
}

fn box_muller_radius(u1: f64) -> f64 {
    (-2.0 * u1.ln()).sqrt()
}

/// The largest magnitude [`Generator::next_normal`] returns: the radius of the smallest `u1`,
/// 2^-53 (about 8.57).
fn max_normal() -> f64 {
    box_muller_radius(0.5f64.powi(53))
}

static GLOBAL: Mutex<Option<Generator>> = Mutex::new(None);

/// Seeds the process-wide generator used by every random constructor and initializer.
pub fn manual_seed(seed: u64) {
    *GLOBAL.lock().unwrap_or_else(|p| p.into_inner()) = Some(Generator::new(seed));
}

/// Runs `f` with the process-wide generator.
pub fn with_global<R>(f: impl FnOnce(&mut Generator) -> R) -> R {
    let mut guard = GLOBAL.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(|| Generator::new(DEFAULT_SEED)))
}

/// A copy of the process-wide generator's state (for checkpoints).
pub fn global_state() -> Generator {
    with_global(|g| g.clone())
}

/// Restores the process-wide generator from [`global_state`].
pub fn set_global_state(state: Generator) {
    *GLOBAL.lock().unwrap_or_else(|p| p.into_inner()) = Some(state);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream() {
        let (mut a, mut b) = (Generator::new(7), Generator::new(7));
        assert!((0..100).all(|_| a.next_u64() == b.next_u64()));
        assert_ne!(Generator::new(7).next_u64(), Generator::new(8).next_u64());
    }

    #[test]
    fn state_round_trips_and_the_zero_state_is_refused() {
        let mut g = Generator::new(3);
        g.next_normal(); // leaves a spare normal behind
        let (words, spare) = g.state();
        assert!(spare.is_some());
        let mut copy = Generator::from_state(words, spare).unwrap();
        assert_eq!(copy, g);
        assert!((0..10).all(|_| copy.next_normal().to_bits() == g.next_normal().to_bits()));
        let err = Generator::from_state([0; 4], None).unwrap_err().to_string();
        assert!(err.contains("all zeros"), "{err}");
    }

    #[test]
    fn a_spare_normal_that_box_muller_cannot_produce_is_refused() {
        let limit = max_normal();
        assert!((8.57..8.58).contains(&limit), "{limit}");
        for fine in [0.0, -0.0, -limit, limit, 1.5] {
            assert!(Generator::from_state([1; 4], Some(f64::to_bits(fine))).is_ok());
        }
        for bad in [
            f64::NAN,
            f64::INFINITY,
            -f64::INFINITY,
            limit * 1.000_001,
            -9.0,
        ] {
            let err = Generator::from_state([1; 4], Some(bad.to_bits()))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(&format!("spare normal sample is {bad}")),
                "{err}"
            );
        }
        // Whatever the draws, the samples stay within the bound.
        let mut g = Generator::new(5);
        assert!((0..100_000).all(|_| g.next_normal().abs() <= limit));
    }

    #[test]
    fn normal_moments_are_standard() {
        let mut g = Generator::new(1);
        let xs: Vec<f64> = (0..200_000).map(|_| g.next_normal()).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        // Standard errors: 0.0022 for the mean, 0.0032 for the variance.
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.015, "variance {var}");
    }
}
