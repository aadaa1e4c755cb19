//! The digits classifier: data loading, the model, and the training run. Shared by the
//! `digits` example and by the test that proves it trains.

use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;
use rumus::rng::Generator;
use rumus::train::{EpochSummary, Metrics, Trainer, classification};

/// The 1797 images of the UCI handwritten digits set, compiled into the binary.
const DIGITS_CSV: &str = include_str!("../data/digits.csv");

/// Images scaled to [0, 1] and their labels.
pub struct Split {
    pub images: Tensor<(Dyn, D<64>)>,
    pub labels: DynTensor,
}

/// Parses the embedded CSV and splits it 80/20 after a seeded shuffle, so every run (and the
/// test) sees the same train and test images.
pub fn load_digits() -> rumus::Result<(Split, Split)> {
    let mut rows: Vec<(Vec<f32>, i64)> = Vec::new();
    for (line_number, line) in DIGITS_CSV.lines().enumerate() {
        let bad = |message: String| rumus::Error::InvalidArgument {
            op: "load_digits",
            message: format!("line {}: {message}", line_number + 1),
        };
        let values: Vec<f32> = line
            .split(',')
            .map(|v| v.trim().parse::<f32>())
            .collect::<Result<_, _>>()
            .map_err(|e| bad(e.to_string()))?;
        if values.len() != 65 {
            return Err(bad(format!("{} values, expected 65", values.len())));
        }
        rows.push((
            values[..64].iter().map(|p| p / 16.0).collect(),
            values[64] as i64,
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
            labels: DynTensor::from_vec(labels, &[indices.len()])?,
        })
    };
    Ok((split(&order[test_len..])?, split(&order[..test_len])?))
}

#[model]
pub struct Mlp {
    fc1: Linear<64, 128>,
    fc2: Linear<128, 10>,
}

#[model]
impl Mlp {
    tensor_fn! {
        /// Logits of the ten digit classes.
        pub fn forward(&self, x: [B, 64]) -> [B, 10] {
            self.fc2(self.fc1(x).relu())
        }
    }
}

/// Loss and metrics of `model` on `images`/`labels`.
fn measure(
    model: &Mlp,
    images: &Tensor<(Dyn, D<64>)>,
    labels: &DynTensor,
) -> rumus::Result<(DynTensor, Metrics)> {
    classification(model.forward(images)?.as_dyn(), labels)
}

/// Trains for `epochs` with mini-batches of 32 and Adam; returns the per-epoch history.
pub fn train(trainer: Trainer) -> rumus::Result<Vec<EpochSummary>> {
    manual_seed(7);
    let (train, test) = load_digits()?;
    let model = Mlp::new()?;
    let mut optimizer = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 2e-3,
            ..AdamConfig::adam()
        },
    )?;
    let n = train.labels.numel();
    let mut shuffler = Generator::new(11);
    trainer.fit(
        |_epoch| {
            Ok(shuffler
                .permutation(n)
                .chunks(32)
                .map(|c| c.iter().map(|&i| i as i64).collect::<Vec<_>>())
                .collect())
        },
        |batch: &Vec<i64>| {
            let index = DynTensor::from_slice(batch, &[batch.len()])?;
            let images = train.images.as_dyn().index_select(0, &index)?.try_shape()?;
            let (loss, metrics) = measure(&model, &images, &train.labels.index_select(0, &index)?)?;
            optimizer.step(&mut loss.backward()?)?;
            Ok(metrics)
        },
        || {
            let _guard = rumus::no_grad();
            Ok(measure(&model, &test.images, &test.labels)?.1)
        },
        |_| Ok(()),
    )
}
