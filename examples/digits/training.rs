//! The digits classifier: data loading, the model, and the training loop. Shared by the
//! `digits` example and by the test that proves it trains.

use rumus::autograd::no_grad;
use rumus::prelude::*;
use rumus::rng::Generator;

/// The 1797 images of the UCI handwritten digits set, compiled into the binary.
const DIGITS_CSV: &str = include_str!("../data/digits.csv");

pub const PIXELS: usize = 64;
pub const HIDDEN: usize = 128;
pub const CLASSES: usize = 10;

/// Images scaled to [0, 1] and their labels.
pub struct Split {
    pub images: Tensor<(Dyn, D<PIXELS>)>,
    pub labels: DynTensor,
}

/// Parses the embedded CSV and splits it 80/20 after a seeded shuffle, so every run (and the
/// test) sees the same train and test images.
pub fn load_digits() -> rumus::Result<(Split, Split)> {
    let mut rows: Vec<(Vec<f32>, i64)> = Vec::new();
    for (line_number, line) in DIGITS_CSV.lines().enumerate() {
        let values: Vec<f32> = line
            .split(',')
            .map(|v| v.trim().parse::<f32>())
            .collect::<Result<_, _>>()
            .map_err(|e| rumus::Error::InvalidArgument {
                op: "load_digits",
                message: format!("line {}: {e}", line_number + 1),
            })?;
        if values.len() != PIXELS + 1 {
            return Err(rumus::Error::InvalidArgument {
                op: "load_digits",
                message: format!(
                    "line {} has {} values, expected {}",
                    line_number + 1,
                    values.len(),
                    PIXELS + 1
                ),
            });
        }
        rows.push((
            values[..PIXELS].iter().map(|p| p / 16.0).collect(),
            values[PIXELS] as i64,
        ));
    }
    let order = Generator::new(2024).permutation(rows.len());
    let test_len = rows.len() / 5;
    let split = |indices: &[usize]| -> rumus::Result<Split> {
        let images: Vec<f32> = indices
            .iter()
            .flat_map(|&i| rows[i].0.iter().copied())
            .collect();
        let labels: Vec<i64> = indices.iter().map(|&i| rows[i].1).collect();
        Ok(Split {
            images: Tensor::from_vec(images)?,
            labels: DynTensor::from_vec(labels, &[indices.len(), 1])?,
        })
    };
    Ok((split(&order[test_len..])?, split(&order[..test_len])?))
}

/// A two-layer perceptron, 64 -> 128 -> 10.
pub struct Mlp {
    pub w1: Tensor<(D<PIXELS>, D<HIDDEN>)>,
    pub b1: Tensor<(D<HIDDEN>,)>,
    pub w2: Tensor<(D<HIDDEN>, D<CLASSES>)>,
    pub b2: Tensor<(D<CLASSES>,)>,
}

impl Mlp {
    /// Weights drawn uniformly in +-1/sqrt(fan_in), as PyTorch's `nn.Linear` does.
    pub fn new() -> rumus::Result<Self> {
        let bound = |fan_in: usize| 1.0 / (fan_in as f64).sqrt();
        Ok(Mlp {
            w1: Tensor::uniform(-bound(PIXELS), bound(PIXELS)).requires_grad_()?,
            b1: Tensor::uniform(-bound(PIXELS), bound(PIXELS)).requires_grad_()?,
            w2: Tensor::uniform(-bound(HIDDEN), bound(HIDDEN)).requires_grad_()?,
            b2: Tensor::uniform(-bound(HIDDEN), bound(HIDDEN)).requires_grad_()?,
        })
    }

    pub fn forward(&self, x: &Tensor<(Dyn, D<PIXELS>)>) -> Tensor<(Dyn, D<CLASSES>)> {
        let h = (&x.matmul(&self.w1) + &self.b1).relu();
        &h.matmul(&self.w2) + &self.b2
    }

    fn parameters(&self) -> [&DynTensor; 4] {
        [
            self.w1.as_dyn(),
            self.b1.as_dyn(),
            self.w2.as_dyn(),
            self.b2.as_dyn(),
        ]
    }
}

/// Mean negative log-likelihood of the true class: cross-entropy on logits.
pub fn cross_entropy(
    logits: &Tensor<(Dyn, D<CLASSES>)>,
    labels: &DynTensor,
) -> rumus::Result<DynTensor> {
    logits
        .log_softmax()
        .as_dyn()
        .gather(1, labels)?
        .mean_all()?
        .neg()
}

/// Fraction of rows whose largest logit is the label.
pub fn accuracy(model: &Mlp, split: &Split) -> rumus::Result<f64> {
    let _guard = no_grad();
    let predicted = model.forward(&split.images).as_dyn().argmax(1, true)?;
    let correct = predicted.eq(&split.labels)?.to_vec::<bool>()?;
    Ok(correct.iter().filter(|&&c| c).count() as f64 / correct.len() as f64)
}

/// SGD with momentum 0.9: `v = 0.9 v + g; w -= lr v`.
pub struct Sgd {
    velocity: Vec<DynTensor>,
    lr: f64,
}

impl Sgd {
    pub fn new(model: &Mlp, lr: f64) -> rumus::Result<Self> {
        let velocity = model
            .parameters()
            .iter()
            .map(|p| p.zeros_like())
            .collect::<rumus::Result<_>>()?;
        Ok(Sgd { velocity, lr })
    }

    pub fn step(&mut self, model: &Mlp, grads: &mut GradientStore) -> rumus::Result<()> {
        let _guard = no_grad();
        for (param, velocity) in model.parameters().into_iter().zip(&self.velocity) {
            let grad = grads.grad(param)?.clone();
            grads.remove(param);
            velocity.scale_add_(0.9, 1.0, &grad)?;
            param.add_scaled_(-self.lr, velocity)?;
        }
        Ok(())
    }
}

/// Per-epoch numbers.
pub struct EpochReport {
    pub epoch: usize,
    pub train_loss: f64,
    pub test_accuracy: f64,
}

/// Trains for `epochs` with mini-batches of 32 and reports after each epoch.
pub fn train(epochs: usize, mut on_epoch: impl FnMut(&EpochReport)) -> rumus::Result<(Mlp, f64)> {
    manual_seed(7);
    let (train, test) = load_digits()?;
    let model = Mlp::new()?;
    let mut optimizer = Sgd::new(&model, 0.05)?;
    let n = train.images.dims()[0];
    let mut shuffler = Generator::new(11);
    let mut test_accuracy = 0.0;
    for epoch in 1..=epochs {
        let order: Vec<i64> = shuffler
            .permutation(n)
            .into_iter()
            .map(|i| i as i64)
            .collect();
        let mut total_loss = 0.0;
        let mut batches = 0;
        for batch in order.chunks(32) {
            let index = DynTensor::from_slice(batch, &[batch.len()])?;
            let x = train
                .images
                .as_dyn()
                .index_select(0, &index)?
                .try_shape::<(Dyn, D<PIXELS>)>()?;
            let y = train.labels.index_select(0, &index)?;
            let loss = cross_entropy(&model.forward(&x), &y)?;
            let mut grads = loss.backward()?;
            optimizer.step(&model, &mut grads)?;
            total_loss += loss.item::<f32>()? as f64;
            batches += 1;
        }
        test_accuracy = accuracy(&model, &test)?;
        on_epoch(&EpochReport {
            epoch,
            train_loss: total_loss / batches as f64,
            test_accuracy,
        });
    }
    Ok((model, test_accuracy))
}
