//! CPU training repeats bit for bit: the same seed gives the same losses, accuracies and
//! trained parameters on one, two and three threads, and again on a second run. Every
//! floating-point sum must therefore round the same way whatever the thread count and
//! however rayon steals work: the products split across threads (with inner dimensions past
//! the kernels' blocking depth), the direct convolution's weight gradient summed over the
//! batch, layer normalisation's affine gradients summed over rows, dropout, pooling and Adam.
//!
//! The truth is equality between runs, so no expected number is written down here.

#[path = "../examples/digits/training.rs"]
mod training;

use std::sync::Mutex;

use rumus::nn::{Conv2d, CrossEntropyOptions, Dropout, LayerNorm, Linear, Module, cross_entropy};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;
use rumus::rng::Generator;
use rumus::train::{EpochSummary, Trainer};

/// Initialisers and dropout draw from the process-wide generator, which the tests of this
/// binary share: one run at a time, each starting from its own seed.
static GLOBAL_GENERATOR: Mutex<()> = Mutex::new(());

/// `run()` on a fresh rayon pool of `threads` threads, the pool the CPU kernels split across.
fn on_threads<R: Send>(threads: usize, run: impl FnOnce() -> R + Send) -> R {
    let _one_run_at_a_time = GLOBAL_GENERATOR.lock().unwrap_or_else(|e| e.into_inner());
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
        .install(run)
}

/// `run` on 1, 2 and 3 threads, twice each: every result must equal the first.
fn assert_repeats<R: PartialEq + Send>(what: &str, run: impl Fn() -> R + Sync) {
    let first = on_threads(1, &run);
    for threads in [1, 2, 3, 2, 3] {
        let again = on_threads(threads, &run);
        assert!(
            again == first,
            "{what}: the run on {threads} threads differs from the first run, on one thread"
        );
    }
}

/// The training and test losses and accuracies of each epoch, to be compared exactly.
fn digits_history(epochs: usize) -> Vec<(f64, f64, f64, f64)> {
    let history: Vec<EpochSummary> = training::train(Trainer::new(epochs).quiet()).unwrap();
    history
        .iter()
        .map(|s| {
            let (train, eval) = (&s.train, &s.eval);
            (
                train.mean_loss(),
                train.accuracy(),
                eval.mean_loss(),
                eval.accuracy(),
            )
        })
        .collect()
}

#[test]
fn digits_mlp_reports_the_same_losses_and_accuracy_on_any_thread_count() {
    assert_repeats("the digits MLP's per-epoch losses and accuracies", || {
        digits_history(2)
    });
}

/// A Fashion-MNIST-sized CNN: two 3x3 convolutions with max pooling, then dropout, layer
/// normalisation and two linear layers. The first linear layer's 784 inputs are more than
/// the matrix kernels sum in one block, and the batch makes every kernel worth splitting.
struct Cnn {
    conv1: Conv2d<1, 8, 3>,
    conv2: Conv2d<8, 16, 3>,
    dropout: Dropout,
    norm: LayerNorm<784>,
    fc1: Linear<784, 128>,
    fc2: Linear<128, 10>,
}

impl Cnn {
    fn new() -> Cnn {
        Cnn {
            conv1: Conv2d::with_options(1, 1, 1).unwrap(),
            conv2: Conv2d::with_options(1, 1, 1).unwrap(),
            dropout: Dropout::new(0.25).unwrap(),
            norm: LayerNorm::new().unwrap(),
            fc1: Linear::new().unwrap(),
            fc2: Linear::new().unwrap(),
        }
    }

    fn parameters(&self) -> Vec<DynTensor> {
        let layers: [&dyn Module; 5] = [&self.conv1, &self.conv2, &self.norm, &self.fc1, &self.fc2];
        layers.iter().flat_map(|l| l.parameters()).collect()
    }

    /// Logits `[N, 10]` of `[N, 1, 28, 28]` images.
    fn forward(&self, x: &DynTensor) -> rumus::Result<DynTensor> {
        let pooled = |h: DynTensor| h.relu()?.max_pool2d((2, 2), (2, 2), (0, 0));
        let h = pooled(self.conv1.forward_dyn(x)?)?;
        let h = pooled(self.conv2.forward_dyn(&h)?)?;
        let h = self.dropout.forward_dyn(&h.flatten(1, -1)?)?;
        let h = self.norm.forward_dyn(&h)?;
        let h = self.fc1.forward_dyn(&h)?.relu()?;
        self.fc2.forward_dyn(&h)
    }
}

/// `[64, 1, 28, 28]` images and their `[64]` labels, drawn from `seed`.
fn batch(seed: u64) -> (DynTensor, DynTensor) {
    let mut g = Generator::new(seed);
    let n = 64;
    let pixels = (0..n * 28 * 28).map(|_| g.next_f64() as f32).collect();
    let labels = (0..n).map(|_| g.below(10) as i64).collect();
    (
        DynTensor::from_vec(pixels, &[n, 1, 28, 28]).unwrap(),
        DynTensor::from_vec(labels, &[n]).unwrap(),
    )
}

/// The loss of each of four Adam steps and every trained parameter, as bits.
fn cnn_run() -> (Vec<u32>, Vec<Vec<u32>>) {
    manual_seed(5);
    let model = Cnn::new();
    let mut adam = Adam::new(model.parameters(), AdamConfig::adam()).unwrap();
    let losses = (0..4)
        .map(|step| {
            let (x, y) = batch(100 + step);
            let loss = cross_entropy(
                &model.forward(&x).unwrap(),
                &y,
                &CrossEntropyOptions::default(),
            )
            .unwrap();
            adam.step(&mut loss.backward().unwrap()).unwrap();
            loss.to_vec::<f32>().unwrap()[0].to_bits()
        })
        .collect();
    let parameters = model
        .parameters()
        .iter()
        .map(|p| {
            p.to_vec::<f32>()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect()
        })
        .collect();
    (losses, parameters)
}

#[test]
fn cnn_trains_to_the_same_bits_on_any_thread_count() {
    assert_repeats("the CNN's losses and parameters", cnn_run);
}
