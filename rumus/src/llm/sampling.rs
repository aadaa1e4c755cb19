//! How generation picks each next token from the model's logits.

use std::borrow::Cow;
use std::collections::HashMap;

use super::invalid;
use crate::error::Result;
use crate::rng::Generator;

/// How [`Llama::generate`](super::Llama::generate) picks each next token from its logits.
///
/// First the penalties on tokens already in the sequence (the prompt and what was
/// generated): `repetition_penalty` divides their positive logits and multiplies their
/// negative ones (Hugging Face's and llama.cpp's), `presence_penalty` is subtracted once
/// from each and `frequency_penalty` once per occurrence (OpenAI's). Then the most likely
/// token at temperature 0; otherwise a draw from `softmax(logits / temperature)`, restricted
/// to the `top_k` most likely tokens, then to those at least `min_p` times as likely as the
/// most likely one, then to the fewest most likely ones whose probabilities sum to `top_p`
/// (nucleus sampling), renormalised.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampling {
    /// 0 (greedy) or more; below 1 sharpens the distribution, above flattens it.
    pub temperature: f64,
    /// Keep only the `k` most likely tokens (`None`: all).
    pub top_k: Option<usize>,
    /// Keep the smallest set of most likely tokens with probability `p` or more (in `(0, 1]`;
    /// `None`: all).
    pub top_p: Option<f64>,
    /// Keep only tokens at least `min_p` times as likely as the most likely one (in
    /// `[0, 1]`; `None`: all).
    pub min_p: Option<f64>,
    /// Above 1 makes tokens already in the sequence less likely (1: no penalty; > 0).
    pub repetition_penalty: f64,
    /// Subtracted from the logit of each token already in the sequence (in `[-2, 2]`).
    pub presence_penalty: f64,
    /// Subtracted from a token's logit once per time it is in the sequence (in `[-2, 2]`).
    pub frequency_penalty: f64,
}

impl Default for Sampling {
    /// Plain sampling at temperature 1.
    fn default() -> Self {
        Sampling {
            temperature: 1.0,
            top_k: None,
            top_p: None,
            min_p: None,
            repetition_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
        }
    }
}

impl Sampling {
    /// Whether the values are in their ranges, or an error naming the first that is not.
    ///
    /// # Errors
    /// A temperature below 0 or not finite, `top_k` 0, `top_p` outside `(0, 1]`, `min_p`
    /// outside `[0, 1]`, a repetition penalty not above 0, or a presence or frequency
    /// penalty outside `[-2, 2]`.
    pub fn check(&self) -> Result<()> {
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
        if let Some(p) = self.min_p
            && !(0.0..=1.0).contains(&p)
        {
            return bad(format!("min_p {p} is outside [0, 1]"));
        }
        if !(self.repetition_penalty > 0.0 && self.repetition_penalty.is_finite()) {
            return bad(format!(
                "repetition_penalty {} is not finite and above 0",
                self.repetition_penalty
            ));
        }
        for (name, value) in [
            ("presence_penalty", self.presence_penalty),
            ("frequency_penalty", self.frequency_penalty),
        ] {
            if !(-2.0..=2.0).contains(&value) {
                return bad(format!("{name} {value} is outside [-2, 2]"));
            }
        }
        Ok(())
    }

    /// `logits` with the penalties on the tokens of `history` (the sequence so far) applied;
    /// `logits` itself where there are none.
    pub fn penalized<'a>(&self, logits: &'a [f32], history: &[i64]) -> Cow<'a, [f32]> {
        let none = self.repetition_penalty == 1.0
            && self.presence_penalty == 0.0
            && self.frequency_penalty == 0.0;
        if none || history.is_empty() {
            return Cow::Borrowed(logits);
        }
        let mut counts: HashMap<usize, usize> = HashMap::new();
        for &token in history {
            if let Ok(t) = usize::try_from(token)
                && t < logits.len()
            {
                *counts.entry(t).or_default() += 1;
            }
        }
        let mut out = logits.to_vec();
        for (token, count) in counts {
            let mut l = f64::from(out[token]);
            l = if l > 0.0 {
                l / self.repetition_penalty
            } else {
                l * self.repetition_penalty
            };
            l -= self.presence_penalty + self.frequency_penalty * count as f64;
            out[token] = l as f32;
        }
        Cow::Owned(out)
    }

    /// [`Sampling::draw`] from the logits [`Sampling::penalized`] for `history`.
    pub fn draw_after(&self, logits: &[f32], history: &[i64], rng: &mut Generator) -> i64 {
        self.draw(&self.penalized(logits, history), rng)
    }

    /// The probabilities sampling draws from, by token (zeros for the tokens cut away).
    ///
    /// Only the tokens a restriction may keep are sorted: `top_k` selects its `k` in linear
    /// time, and `top_p` sorts the tokens above a weight threshold, lowered only when their
    /// mass falls short of `p` (sorting a 49,152-token vocabulary per token was a seventh of
    /// a batched server step).
    pub fn probabilities(&self, logits: &[f32]) -> Vec<f64> {
        let mut probs = vec![0.0; logits.len()];
        // Most likely first; equals by index, as a stable sort orders them.
        let before = |a: &usize, b: &usize| logits[*b].total_cmp(&logits[*a]).then(a.cmp(b));
        let Some(best) = (0..logits.len()).min_by(before) else {
            return probs;
        };
        if self.temperature == 0.0 {
            probs[best] = 1.0;
            return probs;
        }
        let top = f64::from(logits[best]);
        let weight = |i: usize| ((f64::from(logits[i]) - top) / self.temperature).exp();
        let mut kept: Vec<usize> = (0..logits.len()).collect();
        if let Some(k) = self.top_k
            && k < kept.len()
        {
            kept.select_nth_unstable_by(k - 1, before);
            kept.truncate(k);
        }
        // The most likely token has weight 1: min_p keeps the weights of min_p or more.
        if let Some(min_p) = self.min_p {
            kept.retain(|&i| i == best || weight(i) >= min_p);
        }
        let weights: Vec<f64> = kept.iter().map(|&i| weight(i)).collect();
        let total: f64 = weights.iter().sum();
        if let Some(p) = self.top_p {
            kept = nucleus(kept, &weights, total, p, before);
        }
        let total: f64 = kept.iter().map(|&i| weight(i)).sum();
        for &i in &kept {
            probs[i] = weight(i) / total;
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

/// The fewest most likely of `candidates` (weights `weights`, summing to `total`) whose
/// mass reaches `p` of `total`. Sorts the candidates of weight `threshold` or more, which
/// holds the answer once their mass reaches `p` (every other candidate is lighter than all
/// of them); otherwise lowers the threshold and sorts more.
fn nucleus(
    candidates: Vec<usize>,
    weights: &[f64],
    total: f64,
    p: f64,
    before: impl Fn(&usize, &usize) -> std::cmp::Ordering,
) -> Vec<usize> {
    let mut threshold = 1e-3;
    loop {
        let mut heavy: Vec<(usize, f64)> = candidates
            .iter()
            .zip(weights)
            .filter(|&(_, &w)| w >= threshold)
            .map(|(&i, &w)| (i, w))
            .collect();
        heavy.sort_by(|a, b| before(&a.0, &b.0));
        let mut sum = 0.0;
        let reached = heavy.iter().position(|&(_, w)| {
            sum += w / total;
            sum >= p
        });
        match reached {
            Some(last) => return heavy[..=last].iter().map(|&(i, _)| i).collect(),
            None if threshold == 0.0 => return heavy.into_iter().map(|(i, _)| i).collect(),
            None => {
                threshold = if threshold < 1e-12 {
                    0.0
                } else {
                    threshold * 1e-3
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Logits of probabilities 1/2, 1/4, 1/8, 1/8.
    fn logits() -> Vec<f32> {
        vec![4f32.ln(), 2f32.ln(), 0.0, 0.0]
    }

    fn close(got: &[f64], want: &[f64]) {
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-6, "{got:?} against {want:?}");
        }
    }

    #[test]
    fn min_p_keeps_the_tokens_at_least_that_fraction_as_likely_as_the_best() {
        let sampling = |min_p| Sampling {
            min_p: Some(min_p),
            ..Sampling::default()
        };
        // Relative to the best: 1, 1/2, 1/4, 1/4.
        close(
            &sampling(0.3).probabilities(&logits()),
            &[2.0 / 3.0, 1.0 / 3.0, 0.0, 0.0],
        );
        close(
            &sampling(0.24).probabilities(&logits()),
            &[0.5, 0.25, 0.125, 0.125],
        );
        close(
            &sampling(1.0).probabilities(&logits()),
            &[1.0, 0.0, 0.0, 0.0],
        );
    }

    #[test]
    fn penalties_lower_the_tokens_already_in_the_sequence() {
        let (l, history) = (logits(), [0i64, 2, 2, 7, -1]);
        let repetition = Sampling {
            repetition_penalty: 2.0,
            ..Sampling::default()
        };
        // ln 4 / 2 = ln 2 (positive: divided); 0 stays 0 (times 2); tokens 7 and -1 are
        // outside the vocabulary and ignored.
        let got = repetition.penalized(&l, &history);
        close(
            &got.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
            &[2f64.ln(), 2f64.ln(), 0.0, 0.0],
        );
        let openai = Sampling {
            presence_penalty: 0.5,
            frequency_penalty: 0.25,
            ..Sampling::default()
        };
        let got = openai.penalized(&l, &history);
        let want = [4f64.ln() - 0.75, 2f64.ln(), -0.5 - 0.5, 0.0];
        close(
            &got.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
            &want,
        );
        // No penalties, or no history: the logits themselves.
        assert!(matches!(
            Sampling::default().penalized(&l, &history),
            Cow::Borrowed(_)
        ));
        assert!(matches!(openai.penalized(&l, &[]), Cow::Borrowed(_)));
    }

    #[test]
    fn out_of_range_values_are_refused_by_name() {
        for (sampling, name) in [
            (
                Sampling {
                    min_p: Some(1.5),
                    ..Sampling::default()
                },
                "min_p",
            ),
            (
                Sampling {
                    repetition_penalty: 0.0,
                    ..Sampling::default()
                },
                "repetition_penalty",
            ),
            (
                Sampling {
                    presence_penalty: 2.5,
                    ..Sampling::default()
                },
                "presence_penalty",
            ),
            (
                Sampling {
                    frequency_penalty: -3.0,
                    ..Sampling::default()
                },
                "frequency_penalty",
            ),
        ] {
            let message = sampling.check().unwrap_err().to_string();
            assert!(message.contains(name), "{message}");
        }
        assert!(Sampling::default().check().is_ok());
    }

    /// The restrictions by a full sort of the vocabulary, as written in the type's docs.
    fn by_full_sort(sampling: &Sampling, logits: &[f32]) -> Vec<f64> {
        let mut order: Vec<usize> = (0..logits.len()).collect();
        order.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]));
        let top = f64::from(logits[order[0]]);
        let keep = sampling.top_k.unwrap_or(order.len()).min(order.len());
        let weights: Vec<f64> = order[..keep]
            .iter()
            .map(|&i| ((f64::from(logits[i]) - top) / sampling.temperature).exp())
            .collect();
        let keep = sampling.min_p.map_or(keep, |m| {
            weights.iter().take_while(|&&w| w >= m).count().max(1)
        });
        let total: f64 = weights[..keep].iter().sum();
        let mut sum = 0.0;
        let kept = sampling.top_p.map_or(keep, |p| {
            weights[..keep]
                .iter()
                .position(|w| {
                    sum += w / total;
                    sum >= p
                })
                .map_or(keep, |last| last + 1)
        });
        let total: f64 = weights[..kept].iter().sum();
        let mut probs = vec![0.0; logits.len()];
        for (&i, w) in order[..kept].iter().zip(&weights) {
            probs[i] = w / total;
        }
        probs
    }

    #[test]
    fn restrictions_without_a_full_sort_equal_those_with_one() {
        let mut rng = Generator::new(5);
        // Many near ties (logits rounded to steps of 1/4) and a long light tail.
        let logits: Vec<f32> = (0..5000)
            .map(|_| ((rng.next_f64() * 40.0 - 30.0) * 4.0).round() as f32 / 4.0)
            .collect();
        for top_k in [None, Some(1), Some(7), Some(4999), Some(6000)] {
            for top_p in [None, Some(0.05), Some(0.5), Some(0.99), Some(1.0)] {
                for min_p in [None, Some(0.0), Some(0.01), Some(0.5)] {
                    for temperature in [0.3, 1.0, 4.0] {
                        let sampling = Sampling {
                            temperature,
                            top_k,
                            top_p,
                            min_p,
                            ..Sampling::default()
                        };
                        let (got, want) = (
                            sampling.probabilities(&logits),
                            by_full_sort(&sampling, &logits),
                        );
                        close(&got, &want);
                        // The same tokens kept (a cut in the tail of weights near 1e-17 may
                        // differ with the order of the sums).
                        let kept = |probs: &[f64]| probs.iter().filter(|&&p| p > 1e-12).count();
                        assert_eq!(kept(&got), kept(&want), "{sampling:?}");
                    }
                }
            }
        }
    }
}
