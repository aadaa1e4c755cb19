//! Real data: an MLP on Fashion-MNIST (Debian package `dataset-fashion-mnist`) must reach
//! 85% test accuracy. CI installs the package and sets `RUMUS_REQUIRE_DATA=1`, which makes
//! missing files a failure; elsewhere the test says it was skipped.

use rumus::data::transform::reshape;
use rumus::data::{Batch, DataLoader, Dataset, read_mnist_dir};
use rumus::optim::{Adam, AdamConfig};
use rumus::prelude::*;
use rumus::train::{Accuracy, Run, StepOutput, Trainer, classification};

const DATA: &str = "/usr/share/datasets/fashion-mnist";

#[model(sequential, activation = relu)]
struct Mlp {
    fc1: Linear<784, 256>,
    fc2: Linear<256, 10>,
}

/// The model's loss and metrics on a batch, through the typed boundary `[N, 784]`.
fn measure(model: &Mlp, batch: &Batch) -> rumus::Result<(DynTensor, StepOutput)> {
    classification(
        model.forward(&batch.input::<(Dyn, D<784>)>()?)?.as_dyn(),
        &batch.target,
    )
}

#[test]
fn mlp_reaches_85_percent_on_fashion_mnist() {
    let (train, test) = match read_mnist_dir(DATA) {
        Ok(sets) => sets,
        Err(e) if std::env::var_os("RUMUS_REQUIRE_DATA").is_none() => {
            eprintln!("skipped: {e} (install the Debian package dataset-fashion-mnist)");
            return;
        }
        Err(e) => panic!("Fashion-MNIST is required here: {e}"),
    };
    assert_eq!((train.len(), test.len()), (60_000, 10_000));
    manual_seed(3);
    let model = Mlp::new().unwrap();
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam()).unwrap();
    // The images are [1, 28, 28] items; the MLP takes them flat. Two workers load and
    // collate while the model trains.
    let mut loader = DataLoader::new(train.map(reshape(&[784])), 128)
        .unwrap()
        .shuffle(4)
        .workers(2);
    let mut test_loader = DataLoader::new(test.map(reshape(&[784])), 10_000).unwrap();
    let history = Trainer::new(4)
        .quiet()
        .metric(Accuracy::new())
        .fit(
            Run::new(&model, &mut optimizer),
            |_| Ok(loader.epoch()),
            |batch: Batch, optimizer| {
                let (loss, output) = measure(&model, &batch)?;
                optimizer.step(&mut loss.backward()?)?;
                Ok(output)
            },
            || {
                let model = &model;
                Ok(test_loader
                    .epoch()
                    .map(move |batch| Ok(measure(model, &batch?)?.1)))
            },
            |end| {
                eprintln!("{}", end.summary);
                Ok(())
            },
        )
        .unwrap();
    let accuracy = history.last().unwrap().eval.accuracy();
    assert!(accuracy >= 0.85, "test accuracy {accuracy:.4} below 0.85");
}
