//! Perplexity of a language model: `exp` of the mean cross-entropy of the next tokens, over
//! every token of every batch (not a mean of per-batch perplexities).

use super::{Metric, scores_and_labels};
use crate::error::Result;
use crate::optim::Mode;
use crate::tensor::DynTensor;

/// `exp(mean over tokens of -log softmax(logits)[token])`, from logits `[N, C]` and token ids
/// `[N]` (flatten a `[B, T, C]` output and its `[B, T]` targets first). Computed in `f64` on
/// the host with a max-shifted log-sum-exp. Named `perplexity`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Perplexity {
    nll_sum: f64,
    tokens: usize,
}

impl Perplexity {
    /// No tokens seen yet.
    pub fn new() -> Self {
        Perplexity::default()
    }
}

impl Metric for Perplexity {
    fn name(&self) -> String {
        "perplexity".into()
    }

    fn mode(&self) -> Mode {
        Mode::Min
    }

    fn update(&mut self, prediction: &DynTensor, target: &DynTensor) -> Result<()> {
        let (logits, tokens, vocabulary) = scores_and_labels("Perplexity", prediction, target)?;
        for (row, &token) in logits.chunks(vocabulary).zip(&tokens) {
            let top = row.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let log_sum = top + row.iter().map(|&x| (x - top).exp()).sum::<f64>().ln();
            self.nll_sum += log_sum - row[token];
        }
        self.tokens += tokens.len();
        Ok(())
    }

    fn compute(&self) -> f64 {
        (self.nll_sum / self.tokens as f64).exp()
    }

    fn reset(&mut self) {
        *self = Perplexity::default();
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(Perplexity::default())
    }
}
