//! The timing rule every benchmark example uses.

use std::time::Instant;

/// Median wall time of `f` in milliseconds over `reps` runs after `warmup` runs.
pub fn median_ms(warmup: usize, reps: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warmup {
        f();
    }
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[reps / 2]
}
