//! Classification metrics over class scores `[N, C]` and class indices `[N]`: top-k accuracy
//! and the macro-averaged F1 score.

use super::{Metric, scores_and_labels};
use crate::error::{Error, Result};
use crate::optim::Mode;
use crate::tensor::DynTensor;

/// The fraction of examples whose class is among the `k` highest scores (`k = 1`: the
/// argmax, plain accuracy). Ties count against the example, as `torch.topk` on distinct
/// scores would: the class must score above all but at most `k - 1` others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accuracy {
    k: usize,
    correct: usize,
    count: usize,
}

impl Accuracy {
    /// Plain accuracy (the argmax is the class), named `accuracy`.
    pub fn new() -> Self {
        Accuracy {
            k: 1,
            correct: 0,
            count: 0,
        }
    }

    /// Top-`k` accuracy, named `top<k>_accuracy`; `k` is at least 1.
    pub fn top_k(k: usize) -> Result<Self> {
        if k == 0 {
            return Err(Error::InvalidArgument {
                op: "Accuracy::top_k",
                message: "k is 0; top-k accuracy counts the class among the k highest \
                          scores, so k must be at least 1"
                    .into(),
            });
        }
        Ok(Accuracy {
            k,
            ..Accuracy::new()
        })
    }
}

impl Default for Accuracy {
    fn default() -> Self {
        Accuracy::new()
    }
}

impl Metric for Accuracy {
    fn name(&self) -> String {
        match self.k {
            1 => "accuracy".into(),
            k => format!("top{k}_accuracy"),
        }
    }

    fn mode(&self) -> Mode {
        Mode::Max
    }

    fn update(&mut self, prediction: &DynTensor, target: &DynTensor) -> Result<()> {
        let (scores, labels, classes) = scores_and_labels("Accuracy", prediction, target)?;
        for (row, &label) in scores.chunks(classes).zip(&labels) {
            let own = row[label];
            let above = row.iter().filter(|&&s| s > own).count();
            let tied = row.iter().filter(|&&s| s == own).count() - 1;
            if above + tied < self.k {
                self.correct += 1;
            }
        }
        self.count += labels.len();
        Ok(())
    }

    fn compute(&self) -> f64 {
        self.correct as f64 / self.count as f64
    }

    fn reset(&mut self) {
        *self = Accuracy {
            k: self.k,
            ..Accuracy::new()
        };
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(Accuracy {
            k: self.k,
            ..Accuracy::new()
        })
    }
}

/// The F1 score of each class (`2 tp / (2 tp + fp + fn)`, the argmax as the predicted
/// class), averaged over the classes that occur among the targets or the predictions, as
/// scikit-learn's `f1_score(average="macro")` does. Named `f1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct F1Score {
    /// Per class: true positives, false positives, false negatives.
    counts: Vec<[usize; 3]>,
}

impl F1Score {
    /// Macro-averaged F1 over `classes` classes.
    pub fn macro_average(classes: usize) -> Self {
        F1Score {
            counts: vec![[0; 3]; classes],
        }
    }
}

impl Metric for F1Score {
    fn name(&self) -> String {
        "f1".into()
    }

    fn mode(&self) -> Mode {
        Mode::Max
    }

    fn update(&mut self, prediction: &DynTensor, target: &DynTensor) -> Result<()> {
        let (scores, labels, classes) = scores_and_labels("F1Score", prediction, target)?;
        if classes != self.counts.len() {
            return Err(Error::InvalidArgument {
                op: "F1Score",
                message: format!(
                    "the prediction scores {classes} classes but the metric was made for {} \
                     (`F1Score::macro_average({classes})`)",
                    self.counts.len()
                ),
            });
        }
        for (row, &label) in scores.chunks(classes).zip(&labels) {
            let predicted = argmax(row);
            if predicted == label {
                self.counts[label][0] += 1;
            } else {
                self.counts[predicted][1] += 1;
                self.counts[label][2] += 1;
            }
        }
        Ok(())
    }

    fn compute(&self) -> f64 {
        let present: Vec<f64> = self
            .counts
            .iter()
            .filter(|[tp, fp, fn_]| tp + fp + fn_ > 0)
            .map(|&[tp, fp, fn_]| 2.0 * tp as f64 / (2 * tp + fp + fn_) as f64)
            .collect();
        present.iter().sum::<f64>() / present.len() as f64
    }

    fn reset(&mut self) {
        self.counts.fill([0; 3]);
    }

    fn fresh(&self) -> Box<dyn Metric> {
        Box::new(F1Score::macro_average(self.counts.len()))
    }
}

/// The first index of the highest score.
fn argmax(row: &[f64]) -> usize {
    let mut best = 0;
    for (i, &s) in row.iter().enumerate() {
        if s > row[best] {
            best = i;
        }
    }
    best
}
