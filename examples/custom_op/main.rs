//! A custom op end to end: a fused swish (`swish.rs`, with WGSL kernels in `swish.wgsl`)
//! checked against finite differences, run on the GPU when there is one, and trained as the
//! activation of a digits MLP.
//!
//! ```text
//! cargo run --release --example custom_op
//! ```

#[allow(dead_code)]
#[path = "../digits/training.rs"]
mod digits;
mod swish;

use rumus::autograd::{GradcheckOptions, gradcheck};
use rumus::data::{Batch, Collate, DataLoader, Sample};
use rumus::optim::{Adam, AdamConfig};
use rumus::prelude::*;
use rumus::rng::Generator;
use rumus::train::{Accuracy, Run, StepOutput, Trainer, classification};

use swish::{swish, swish_typed};

/// The digits MLP with the custom swish between its layers.
#[model]
struct SwishMlp {
    fc1: Linear<64, 128>,
    fc2: Linear<128, 10>,
}

impl SwishMlp {
    fn forward(&self, x: &Tensor<(Dyn, D<64>)>) -> rumus::Result<Tensor<(Dyn, D<10>)>> {
        let hidden = swish_typed(&self.fc1.try_forward(x)?, 1.0)?;
        self.fc2.try_forward(&hidden)
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. The kernels' gradient against central finite differences, in f64.
    let x = DynTensor::randn_with(&[6, 7], 0.0, 3.0, DType::F64, &mut Generator::new(1))?;
    for beta in [0.5, 1.0, 2.0] {
        gradcheck(
            |x| swish(&x[0], beta),
            std::slice::from_ref(&x),
            GradcheckOptions::default(),
        )?;
    }
    println!("gradcheck: swish matches finite differences for beta 0.5, 1 and 2");

    // 2. The WGSL kernels against the CPU ones, forward and backward.
    let x = DynTensor::randn_with(&[1000], 0.0, 3.0, DType::F32, &mut Generator::new(2))?;
    match Device::gpu() {
        Ok(gpu) => {
            let run = |x: &DynTensor| -> rumus::Result<(Vec<f32>, Vec<f32>)> {
                let x = x.detach().requires_grad_()?;
                let y = swish(&x, 1.5)?;
                let grads = y.sum_all()?.backward()?;
                Ok((y.to_vec()?, grads.grad(&x)?.to_vec()?))
            };
            let (cpu, gpu_out) = (run(&x)?, run(&x.to(&gpu)?)?);
            let gap = |a: &[f32], b: &[f32]| {
                a.iter()
                    .zip(b)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0f32, f32::max)
            };
            println!(
                "GPU kernels on {}: largest difference to the CPU: output {:.1e}, gradient {:.1e}",
                gpu,
                gap(&cpu.0, &gpu_out.0),
                gap(&cpu.1, &gpu_out.1)
            );
        }
        Err(e) => println!("GPU kernels not run: {e}"),
    }

    // 3. Training through it.
    manual_seed(7);
    let (train, test) = digits::load_digits()?;
    let test = Sample::collate(test.items().to_vec())?;
    let model = SwishMlp::new()?;
    let mut optimizer = Adam::new(
        model.parameters(),
        AdamConfig {
            lr: 2e-3,
            ..AdamConfig::adam()
        },
    )?;
    let measure = |batch: &Batch| -> rumus::Result<(DynTensor, StepOutput)> {
        classification(
            model.forward(&batch.input::<(Dyn, D<64>)>()?)?.as_dyn(),
            &batch.target,
        )
    };
    let mut loader = DataLoader::new(train, 32)?.shuffle(11);
    let history = Trainer::new(20).quiet().metric(Accuracy::new()).fit(
        Run::new(&model, &mut optimizer),
        |_epoch| Ok(loader.epoch()),
        |batch: Batch, optimizer| {
            let (loss, output) = measure(&batch)?;
            optimizer.step(&mut loss.backward()?)?;
            Ok(output)
        },
        || Ok([measure(&test).map(|(_, output)| output)]),
        |_| Ok(()),
    )?;
    let last = history.last().expect("20 epochs");
    println!("test_accuracy={:.4}", last.eval.accuracy());
    Ok(())
}
