//! The server's counters in Prometheus's text format (`GET /metrics`): requests by endpoint
//! and status, tokens in and out, latency histograms, and the engine's queue, batch and
//! key/value blocks.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Everything `GET /metrics` reports. Shared by the HTTP handlers and the engine thread.
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    pub prompt_tokens: AtomicU64,
    pub generated_tokens: AtomicU64,
    /// Requests waiting for room in the batch or the key/value pool.
    pub waiting: AtomicUsize,
    /// Sequences in the running batch.
    pub running: AtomicUsize,
    pub kv_blocks_used: AtomicUsize,
    pub kv_blocks_total: AtomicUsize,
    pub request_seconds: Histogram,
    pub first_token_seconds: Histogram,
    pub inter_token_seconds: Histogram,
}

/// Counts of observations at or below each bound (Prometheus's cumulative buckets are
/// summed when rendered), with their sum.
pub struct Histogram {
    bounds: &'static [f64],
    state: Mutex<HistogramState>,
}

#[derive(Default)]
struct HistogramState {
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

/// Seconds from a millisecond to a few minutes.
const LATENCY_BOUNDS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram {
            bounds: LATENCY_BOUNDS,
            state: Mutex::new(HistogramState {
                counts: vec![0; LATENCY_BOUNDS.len()],
                ..HistogramState::default()
            }),
        }
    }
}

impl Histogram {
    /// Counts one observation of `elapsed`.
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(bucket) = self.bounds.iter().position(|&b| seconds <= b) {
            state.counts[bucket] += 1;
        }
        state.sum += seconds;
        state.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, count) in self.bounds.iter().zip(&state.counts) {
            cumulative += count;
            let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", state.count);
        let _ = writeln!(
            out,
            "{name}_sum {}\n{name}_count {}",
            state.sum, state.count
        );
    }
}

impl Metrics {
    /// Counts a finished request to `endpoint` answered with `status`.
    pub fn count_request(&self, endpoint: &'static str, status: u16) {
        let mut requests = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        *requests.entry((endpoint, status)).or_default() += 1;
    }

    /// Everything, in Prometheus's text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str(
            "# HELP rumus_requests_total HTTP requests answered, by endpoint and status.\n\
             # TYPE rumus_requests_total counter\n",
        );
        let requests = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        for ((endpoint, status), count) in requests.iter() {
            let _ = writeln!(
                out,
                "rumus_requests_total{{endpoint=\"{endpoint}\",status=\"{status}\"}} {count}"
            );
        }
        drop(requests);
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let level = |a: &AtomicUsize| a.load(Ordering::Relaxed);
        for (name, kind, help, value) in [
            (
                "rumus_prompt_tokens_total",
                "counter",
                "Prompt tokens run.",
                load(&self.prompt_tokens),
            ),
            (
                "rumus_generated_tokens_total",
                "counter",
                "Tokens generated.",
                load(&self.generated_tokens),
            ),
            (
                "rumus_queue_depth",
                "gauge",
                "Requests waiting to join the running batch.",
                level(&self.waiting) as u64,
            ),
            (
                "rumus_running_sequences",
                "gauge",
                "Sequences in the running batch.",
                level(&self.running) as u64,
            ),
            (
                "rumus_kv_cache_blocks_used",
                "gauge",
                "Key/value cache blocks held by sequences.",
                level(&self.kv_blocks_used) as u64,
            ),
            (
                "rumus_kv_cache_blocks_total",
                "gauge",
                "Key/value cache blocks in the pool.",
                level(&self.kv_blocks_total) as u64,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        self.request_seconds.render(
            &mut out,
            "rumus_request_duration_seconds",
            "Time from a generation request's arrival to its last token.",
        );
        self.first_token_seconds.render(
            &mut out,
            "rumus_time_to_first_token_seconds",
            "Time from a generation request's arrival to its first token.",
        );
        self.inter_token_seconds.render(
            &mut out,
            "rumus_inter_token_latency_seconds",
            "Time between consecutive tokens of a sequence.",
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_render_cumulative_buckets_with_sum_and_count() {
        let metrics = Metrics::default();
        for ms in [2, 2, 40, 200_000] {
            metrics
                .first_token_seconds
                .observe(Duration::from_millis(ms));
        }
        metrics.count_request("completions", 200);
        metrics.count_request("completions", 200);
        metrics.count_request("completions", 400);
        let text = metrics.render();
        let line = |prefix: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} in\n{text}"))
                .to_string()
        };
        assert!(line("rumus_time_to_first_token_seconds_bucket{le=\"0.0025\"}").ends_with(" 2"));
        assert!(line("rumus_time_to_first_token_seconds_bucket{le=\"0.05\"}").ends_with(" 3"));
        // 200 s is past the last bound: only in +Inf.
        assert!(line("rumus_time_to_first_token_seconds_bucket{le=\"120\"}").ends_with(" 3"));
        assert!(line("rumus_time_to_first_token_seconds_bucket{le=\"+Inf\"}").ends_with(" 4"));
        assert!(line("rumus_time_to_first_token_seconds_count").ends_with(" 4"));
        assert!(
            line("rumus_requests_total{endpoint=\"completions\",status=\"200\"}").ends_with(" 2")
        );
    }
}
