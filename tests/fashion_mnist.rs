//! Real data: an MLP on Fashion-MNIST (Debian package `dataset-fashion-mnist`) must reach
//! 85% test accuracy. CI installs the package and sets `RUMUS_REQUIRE_DATA=1`, which makes
//! missing files a failure; elsewhere the test says it was skipped.

use rumus::data::{ImageSet, read_mnist_dir};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;
use rumus::rng::Generator;
use rumus::train::{Trainer, classification};

const DATA: &str = "/usr/share/datasets/fashion-mnist";

#[model(sequential, activation = relu)]
struct Mlp {
    fc1: Linear<784, 256>,
    fc2: Linear<256, 10>,
}

fn batch(set: &ImageSet, indices: &[usize]) -> rumus::Result<(Tensor<(Dyn, D<784>)>, DynTensor)> {
    let (images, labels) = set.batch(indices)?;
    Ok((images.try_shape()?, labels))
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
    let mut shuffler = Generator::new(4);
    let history = Trainer::new(4)
        .quiet()
        .fit(
            |_| {
                Ok(shuffler
                    .permutation(train.len())
                    .chunks(128)
                    .map(<[usize]>::to_vec)
                    .collect())
            },
            |indices: &Vec<usize>| {
                let (x, y) = batch(&train, indices)?;
                let (loss, metrics) = classification(model.forward(&x)?.as_dyn(), &y)?;
                optimizer.step(&mut loss.backward()?)?;
                Ok(metrics)
            },
            || {
                let _guard = rumus::no_grad();
                let (x, y) = batch(&test, &(0..test.len()).collect::<Vec<_>>())?;
                Ok(classification(model.forward(&x)?.as_dyn(), &y)?.1)
            },
            |summary| {
                eprintln!("{summary}");
                Ok(())
            },
        )
        .unwrap();
    let accuracy = history.last().unwrap().eval.accuracy();
    assert!(accuracy >= 0.85, "test accuracy {accuracy:.4} below 0.85");
}
