//! The digits classifier: data loading, the model, and the training run. Shared by the
//! `digits` example and by the test that proves it trains.

use rumus::data::{Batch, Collate, CsvOptions, DataLoader, InMemory, Sample, parse_csv};
use rumus::optim::{Adam, AdamConfig};
use rumus::prelude::*;
use rumus::rng::Generator;
use rumus::train::{Accuracy, EpochSummary, Run, StepOutput, Trainer, classification};

/// The 1797 images of the UCI handwritten digits set, compiled into the binary: 64 pixel
/// values from 0 to 16, then the digit.
const DIGITS_CSV: &str = include_str!("../data/digits.csv");

/// Parses the embedded CSV, scales pixels to [0, 1], and splits 80/20 after a seeded
/// shuffle, so every run (and the test) sees the same train and test images.
pub fn load_digits() -> rumus::Result<(InMemory<Sample>, InMemory<Sample>)> {
    let mut rows = parse_csv(DIGITS_CSV, "digits.csv", &CsvOptions::labels_last())?;
    for row in &mut rows {
        row.input.values.iter_mut().for_each(|p| *p /= 16.0);
    }
    let order = Generator::new(2024).permutation(rows.len());
    let test_len = rows.len() / 5;
    let pick =
        |indices: &[usize]| InMemory::new(indices.iter().map(|&i| rows[i].clone()).collect());
    Ok((pick(&order[test_len..]), pick(&order[..test_len])))
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
fn measure(model: &Mlp, batch: &Batch) -> rumus::Result<(DynTensor, StepOutput)> {
    classification(
        model.forward(&batch.input::<(Dyn, D<64>)>()?)?.as_dyn(),
        &batch.target,
    )
}

/// Trains for `epochs` with shuffled mini-batches of 32 and Adam; returns the per-epoch
/// history.
pub fn train(trainer: Trainer) -> rumus::Result<Vec<EpochSummary>> {
    manual_seed(7);
    let (train, test) = load_digits()?;
    let test = Sample::collate(test.items().to_vec())?;
    let model = Mlp::new()?;
    let mut optimizer = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 2e-3,
            ..AdamConfig::adam()
        },
    )?;
    let mut loader = DataLoader::new(train, 32)?.shuffle(11);
    trainer.metric(Accuracy::new()).fit(
        Run::new(&model, &mut optimizer),
        // Epoch `e` (from 1) is the loader's epoch `e - 1`, whatever came before: a run
        // resumed from a checkpoint sees the batches the uninterrupted run would have.
        |epoch| Ok(loader.epoch_from(epoch as u64 - 1, 0)),
        |batch: Batch, optimizer| {
            let (loss, output) = measure(&model, &batch)?;
            optimizer.step(&mut loss.backward()?)?;
            Ok(output)
        },
        || Ok([measure(&model, &test).map(|(_, output)| output)]),
        |_| Ok(()),
    )
}
