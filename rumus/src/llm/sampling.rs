//! How generation picks each next token from the model's logits.

use super::invalid;
use crate::error::Result;
use crate::rng::Generator;

/// How [`Llama::generate`](super::Llama::generate) picks each next token from its logits: the most likely one at
/// temperature 0; otherwise a draw from `softmax(logits / temperature)`, restricted first to
/// the `top_k` most likely tokens and then to the fewest most likely ones whose probabilities
/// sum to `top_p` (nucleus sampling), renormalised, as Hugging Face's `generate` samples.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// 0 (greedy) or more; below 1 sharpens the distribution, above flattens it.
    pub temperature: f64,
    /// Keep only the `k` most likely tokens (`None`: all).
    pub top_k: Option<usize>,
    /// Keep the smallest set of most likely tokens with probability `p` or more (in `(0, 1]`;
    /// `None`: all).
    pub top_p: Option<f64>,
}

impl Default for Sampling {
    /// Plain sampling at temperature 1.
    fn default() -> Self {
        Sampling {
            temperature: 1.0,
            top_k: None,
            top_p: None,
        }
    }
}

impl Sampling {
    pub(super) fn check(&self) -> Result<()> {
        let bad = |what: String| Err(invalid(format!("sampling: {what}")));
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return bad(format!(
                "temperature {} is not finite and >= 0",
                self.temperature
            ));
        }
        if self.top_k == Some(0) {
            return bad("top_k 0 keeps no token".into());
        }
        if let Some(p) = self.top_p
            && !(p > 0.0 && p <= 1.0)
        {
            return bad(format!("top_p {p} is outside (0, 1]"));
        }
        Ok(())
    }

    /// The probabilities sampling draws from, by token (zeros for the tokens cut away).
    pub fn probabilities(&self, logits: &[f32]) -> Vec<f64> {
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        let mut probs = vec![0.0; logits.len()];
        let Some(&best) = order.first() else {
            return probs;
        };
        if self.temperature == 0.0 {
            probs[best] = 1.0;
            return probs;
        }
        let top = f64::from(logits[best]);
        let keep = self.top_k.unwrap_or(order.len()).min(order.len());
        let weights: Vec<f64> = order[..keep]
            .iter()
            .map(|&i| ((f64::from(logits[i]) - top) / self.temperature).exp())
            .collect();
        let total: f64 = weights.iter().sum();
        let mut kept = keep;
        if let Some(p) = self.top_p {
            let mut sum = 0.0;
            kept = weights
                .iter()
                .position(|w| {
                    sum += w / total;
                    sum >= p
                })
                .map_or(keep, |last| last + 1);
        }
        let total: f64 = weights[..kept].iter().sum();
        for (&i, w) in order[..kept].iter().zip(&weights) {
            probs[i] = w / total;
        }
        probs
    }

    /// One token drawn from [`Sampling::probabilities`] with `rng`.
    pub fn draw(&self, logits: &[f32], rng: &mut Generator) -> i64 {
        if self.temperature == 0.0 {
            // The most likely token (the first of equals), without sorting the vocabulary.
            let best = (0..logits.len())
                .rev()
                .max_by(|&a, &b| logits[a].total_cmp(&logits[b]));
            return best.unwrap_or(0) as i64;
        }
        let probs = self.probabilities(logits);
        let u = rng.next_f64();
        let mut sum = 0.0;
        let mut last = 0;
        for (i, &p) in probs.iter().enumerate() {
            if p == 0.0 {
                continue;
            }
            sum += p;
            last = i;
            if u < sum {
                return i as i64;
            }
        }
        last as i64
    }
}
