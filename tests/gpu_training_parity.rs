//! Layers, losses and optimizers on the GPU against the same on the CPU: outputs, every
//! gradient, running statistics, and parameters after a few optimizer steps. Runs on lavapipe
//! in CI (see `tests/gpu_parity.rs` for the ops themselves).

mod common;

use common::gpu::{assert_close, gpu, serial, tensor};
use rumus::nn::{
    AdaptiveAvgPool2d, BatchNorm2d, Conv1d, ConvTranspose2d, CrossEntropyOptions, Embedding,
    GroupNorm, Gru, KlReduction, LayerNorm, Linear, Lstm, Module, NllLossOptions, Reduction,
    RmsNorm, binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy, huber_loss,
    kl_div, l1_loss, mse_loss, nll_loss, smooth_l1_loss,
};
use rumus::optim::{
    Adagrad, AdagradConfig, Adam, AdamConfig, Optimizer, Rmsprop, RmspropConfig, Sgd, SgdConfig,
    clip_grad_norm,
};
use rumus::{Device, DynTensor, no_grad};

/// `f` run on CPU copies and GPU copies of `inputs` (each requiring a gradient): its value
/// and the gradient of its sum with respect to every input must agree.
fn check_with_grads(
    what: &str,
    device: &Device,
    inputs: &[DynTensor],
    f: impl Fn(&[DynTensor]) -> DynTensor,
) {
    let run = |device: &Device| {
        let leaves: Vec<DynTensor> = inputs
            .iter()
            .map(|t| t.to(device).unwrap().requires_grad_().unwrap())
            .collect();
        let out = f(&leaves);
        let grads = out.sum_all().unwrap().backward().unwrap();
        let mut results = vec![out.detach()];
        results.extend(leaves.iter().map(|l| grads.grad(l).unwrap().clone()));
        results
    };
    let (cpu, on_gpu) = (run(&Device::Cpu), run(device));
    for (i, (c, g)) in cpu.iter().zip(&on_gpu).enumerate() {
        assert_close(&format!("{what}: result {i}"), c, g);
    }
}

#[test]
fn losses_match_the_cpu() {
    let Some(device) = gpu() else { return };
    let (input, target) = (tensor(&[6, 5], 1), tensor(&[6, 5], 2));
    let probs = input.sigmoid().unwrap();
    let labels = DynTensor::from_vec(vec![0i64, 4, 2, 2, 1, 3], &[6]).unwrap();
    let pair = [input.clone(), target.clone()];
    let mean = Reduction::Mean;
    check_with_grads("mse", &device, &pair, |t| {
        mse_loss(&t[0], &t[1], mean).unwrap()
    });
    check_with_grads("l1", &device, &pair, |t| {
        l1_loss(&t[0], &t[1], mean).unwrap()
    });
    check_with_grads("smooth_l1", &device, &pair, |t| {
        smooth_l1_loss(&t[0], &t[1], 0.5, Reduction::Sum).unwrap()
    });
    check_with_grads("huber", &device, &pair, |t| {
        huber_loss(&t[0], &t[1], 0.7, Reduction::None).unwrap()
    });
    check_with_grads("cross_entropy smoothed", &device, &pair[..1], |t| {
        let options = CrossEntropyOptions {
            label_smoothing: 0.1,
            ..Default::default()
        };
        cross_entropy(&t[0], &labels, &options).unwrap()
    });
    check_with_grads("nll", &device, &pair[..1], |t| {
        nll_loss(
            &t[0].log_softmax(1).unwrap(),
            &labels,
            &NllLossOptions::default(),
        )
        .unwrap()
    });
    check_with_grads("bce", &device, &[probs, target.sigmoid().unwrap()], |t| {
        binary_cross_entropy(&t[0], &t[1], mean).unwrap()
    });
    check_with_grads(
        "bce with logits",
        &device,
        &[input.clone(), target.sigmoid().unwrap()],
        |t| binary_cross_entropy_with_logits(&t[0], &t[1], None, mean).unwrap(),
    );
    check_with_grads(
        "kl_div",
        &device,
        &[input.log_softmax(1).unwrap(), target.softmax(1).unwrap()],
        |t| kl_div(&t[0], &t[1], KlReduction::BatchMean, false).unwrap(),
    );
}

/// The fused layer-norm kernels (forward and backward) on row lengths that put several rows in
/// a workgroup (5, 300), a whole workgroup on a row (2100) and past the kernel's register
/// cache (4100, composed of other ops instead), with and without each parameter, and on a
/// strided input.
#[test]
fn layer_norm_kernels_match_the_cpu() {
    let Some(device) = gpu() else { return };
    let _serial = serial();
    use rumus::nn::functional::layer_norm;
    // tanh() of the output, so the gradient of the sum is not the trivially zero one of a sum
    // of normalised values.
    for (k, dims) in [[9, 5], [7, 300], [2, 2100], [2, 4100]].iter().enumerate() {
        let n = dims[1];
        let inputs = [
            tensor(dims, 40 + k as u64),
            tensor(&[n], 50 + k as u64),
            tensor(&[n], 60 + k as u64),
        ];
        check_with_grads(&format!("layer_norm {dims:?}"), &device, &inputs, |t| {
            layer_norm(&t[0], Some(&t[1]), Some(&t[2]), 1e-5)
                .unwrap()
                .tanh()
                .unwrap()
        });
        check_with_grads(
            &format!("weight only {dims:?}"),
            &device,
            &inputs[..2],
            |t| {
                layer_norm(&t[0], Some(&t[1]), None, 1e-5)
                    .unwrap()
                    .tanh()
                    .unwrap()
            },
        );
        check_with_grads(
            &format!("bias only {dims:?}"),
            &device,
            &[inputs[0].clone(), inputs[2].clone()],
            |t| {
                layer_norm(&t[0], None, Some(&t[1]), 1e-5)
                    .unwrap()
                    .tanh()
                    .unwrap()
            },
        );
    }
    let strided = tensor(&[6, 4], 70);
    check_with_grads("layer_norm of a transpose", &device, &[strided], |t| {
        layer_norm(&t[0].transpose(0, 1).unwrap(), None, None, 1e-5)
            .unwrap()
            .tanh()
            .unwrap()
    });
}

/// Softmax and log-softmax with their fused backward kernels: short rows several to a
/// workgroup, a middle axis, and rows past the register cache (3000 > 8 x 256, the kernel's
/// tail loops).
#[test]
fn softmax_kernels_match_the_cpu() {
    let Some(device) = gpu() else { return };
    let _serial = serial();
    let cases = [(vec![9, 5], -1), (vec![4, 70, 5], 1), (vec![2, 3000], -1)];
    for (k, (dims, axis)) in cases.into_iter().enumerate() {
        let x = [tensor(&dims, 80 + k as u64).mul_scalar(4.0).unwrap()];
        // tanh() of the output, so the gradient of the sum is not the trivially zero one of
        // a sum of probabilities.
        check_with_grads(&format!("softmax {dims:?} {axis}"), &device, &x, |t| {
            t[0].softmax(axis)
                .unwrap()
                .mul_scalar(7.0)
                .unwrap()
                .tanh()
                .unwrap()
        });
        check_with_grads(&format!("log_softmax {dims:?} {axis}"), &device, &x, |t| {
            t[0].log_softmax(axis).unwrap().tanh().unwrap()
        });
    }
}

/// The activations' gradients from the one-pass kernels, on a contiguous and a strided input.
#[test]
fn activation_gradients_match_the_cpu() {
    let Some(device) = gpu() else { return };
    let _serial = serial();
    let x = [tensor(&[37, 13], 90).mul_scalar(3.0).unwrap()];
    type Activation = fn(&DynTensor) -> DynTensor;
    let activations: [(&str, Activation); 4] = [
        ("relu", |t| t.relu().unwrap()),
        ("leaky_relu", |t| t.leaky_relu(0.2).unwrap()),
        ("sigmoid", |t| t.sigmoid().unwrap()),
        ("tanh", |t| t.tanh().unwrap()),
    ];
    for (name, f) in activations {
        check_with_grads(name, &device, &x, |t| f(&t[0]).mul(&t[0]).unwrap());
        check_with_grads(&format!("{name} of a transpose"), &device, &x, |t| {
            f(&t[0].transpose(0, 1).unwrap())
        });
    }
}

#[test]
fn layers_match_the_cpu() {
    let Some(device) = gpu() else { return };
    let _serial = serial();
    // Parameters drawn on the host from one seed, then moved: the same values on both devices.
    let run = |device: &Device| -> Vec<DynTensor> {
        rumus::manual_seed(21);
        let mut out = Vec::new();
        let mut norm = LayerNorm::<6>::new().unwrap();
        let mut rms = RmsNorm::<6>::new().unwrap();
        let mut group = GroupNorm::<2, 4>::new().unwrap();
        let mut batch = BatchNorm2d::<4>::new().unwrap();
        let mut embedding = Embedding::<10, 6>::new().unwrap();
        let mut conv1d = Conv1d::<4, 3, 3>::new().unwrap();
        let mut transposed = ConvTranspose2d::<4, 2, 3>::new().unwrap();
        let mut lstm = Lstm::<6, 5>::new().unwrap();
        let mut gru = Gru::<6, 5>::new().unwrap();
        for module in [
            &mut norm as &mut dyn Module,
            &mut rms,
            &mut group,
            &mut batch,
            &mut embedding,
            &mut conv1d,
            &mut transposed,
            &mut lstm,
            &mut gru,
        ] {
            module.to_device(device.clone()).unwrap();
        }
        let seq = tensor(&[2, 3, 6], 22).to(device).unwrap();
        let planes = tensor(&[2, 4, 5, 5], 23).to(device).unwrap();
        let signal = tensor(&[2, 4, 9], 24).to(device).unwrap();
        let tokens = DynTensor::from_vec(vec![1i64, 9, 4, 4, 0, 7], &[2, 3])
            .unwrap()
            .to(device)
            .unwrap();
        out.push(norm.forward_dyn(&seq).unwrap());
        out.push(rms.forward_dyn(&seq).unwrap());
        out.push(group.forward_dyn(&planes).unwrap());
        out.push(batch.forward_dyn(&planes).unwrap());
        // the running statistics after one training step, then an evaluation pass
        out.extend(
            batch
                .named_parameters()
                .into_iter()
                .map(|(_, t)| t.detach()),
        );
        batch.eval();
        out.push(batch.forward_dyn(&planes).unwrap());
        out.push(embedding.forward_dyn(&tokens).unwrap());
        out.push(conv1d.forward_dyn(&signal).unwrap());
        out.push(transposed.forward_dyn(&planes).unwrap());
        out.push(AdaptiveAvgPool2d::new(3, 2).forward_dyn(&planes).unwrap());
        let (lstm_out, (h, c)) = lstm.forward_dyn(&seq, None).unwrap();
        out.extend([lstm_out, h, c]);
        let (gru_out, h) = gru.forward_dyn(&seq, None).unwrap();
        out.extend([gru_out, h]);
        // and every parameter gradient of their sum
        let total = out
            .iter()
            .map(|t| t.sum_all().unwrap())
            .reduce(|a, b| a.add(&b).unwrap())
            .unwrap();
        let grads = total.backward().unwrap();
        for module in [
            &norm as &dyn Module,
            &rms,
            &group,
            &embedding,
            &conv1d,
            &transposed,
            &lstm,
            &gru,
        ] {
            out.extend(
                module
                    .parameters()
                    .iter()
                    .map(|p| grads.grad(p).unwrap().clone()),
            );
        }
        out
    };
    let (cpu, on_gpu) = (run(&Device::Cpu), run(&device));
    assert_eq!(cpu.len(), on_gpu.len());
    for (i, (c, g)) in cpu.iter().zip(&on_gpu).enumerate() {
        assert_close(&format!("layer result {i}"), c, g);
    }
}

/// Four steps of `make`'s optimizer on a small regression, with gradient clipping; the final
/// parameters.
fn optimize(
    device: &Device,
    make: &dyn Fn(Vec<DynTensor>) -> Box<dyn Optimizer>,
) -> Vec<DynTensor> {
    let w = tensor(&[5, 3], 40)
        .to(device)
        .unwrap()
        .requires_grad_()
        .unwrap();
    let b = tensor(&[3], 41)
        .to(device)
        .unwrap()
        .requires_grad_()
        .unwrap();
    let x = tensor(&[8, 5], 42).to(device).unwrap();
    let y = tensor(&[8, 3], 43).to(device).unwrap();
    let mut optimizer = make(vec![w.clone(), b.clone()]);
    for _ in 0..4 {
        let loss = mse_loss(&x.matmul(&w).unwrap().add(&b).unwrap(), &y, Reduction::Mean).unwrap();
        let mut grads = loss.backward().unwrap();
        let _no_grad = no_grad();
        clip_grad_norm(&mut grads, &[w.clone(), b.clone()], 1.0).unwrap();
        optimizer.step(&mut grads).unwrap();
    }
    vec![w.detach(), b.detach()]
}

#[test]
fn optimizers_match_the_cpu() {
    let Some(device) = gpu() else { return };
    type Make = Box<dyn Fn(Vec<DynTensor>) -> Box<dyn Optimizer>>;
    let cases: Vec<(&str, Make)> = vec![
        (
            "sgd nesterov",
            Box::new(|p| {
                let config = SgdConfig {
                    lr: 0.1,
                    momentum: 0.9,
                    nesterov: true,
                    weight_decay: 0.01,
                    ..Default::default()
                };
                Box::new(Sgd::new(p, config).unwrap())
            }),
        ),
        (
            "adam",
            Box::new(|p| Box::new(Adam::new(p, AdamConfig::adam()).unwrap())),
        ),
        (
            "adamw",
            Box::new(|p| Box::new(Adam::new(p, AdamConfig::adamw()).unwrap())),
        ),
        (
            "amsgrad",
            Box::new(|p| {
                let config = AdamConfig {
                    amsgrad: true,
                    ..AdamConfig::adam()
                };
                Box::new(Adam::new(p, config).unwrap())
            }),
        ),
        (
            "rmsprop centered",
            Box::new(|p| {
                let config = RmspropConfig {
                    centered: true,
                    momentum: 0.5,
                    ..Default::default()
                };
                Box::new(Rmsprop::new(p, config).unwrap())
            }),
        ),
        (
            "adagrad",
            Box::new(|p| Box::new(Adagrad::new(p, AdagradConfig::default()).unwrap())),
        ),
    ];
    for (name, make) in &cases {
        let (cpu, on_gpu) = (
            optimize(&Device::Cpu, make.as_ref()),
            optimize(&device, make.as_ref()),
        );
        for (c, g) in cpu.iter().zip(&on_gpu) {
            assert_close(name, c, g);
        }
    }
}

#[test]
fn initialisers_fill_gpu_tensors_like_host_ones() {
    use rumus::nn::init;
    let Some(device) = gpu() else { return };
    let _serial = serial();
    type Init = fn(&DynTensor) -> rumus::Result<()>;
    let cases: [(&str, Init); 6] = [
        ("kaiming_uniform_", init::kaiming_uniform_),
        ("kaiming_normal_", init::kaiming_normal_),
        ("xavier_uniform_", init::xavier_uniform_),
        ("xavier_normal_", init::xavier_normal_),
        ("zeros_", init::zeros_),
        ("ones_", init::ones_),
    ];
    for (name, fill) in cases {
        let filled = |device: &Device| {
            rumus::manual_seed(9);
            let t = tensor(&[6, 4, 3], 50).to(device).unwrap();
            fill(&t).unwrap();
            t
        };
        assert_close(name, &filled(&Device::Cpu), &filled(&device));
    }
}

#[test]
fn optimizer_state_moves_back_to_the_parameters_device_on_load() {
    let Some(device) = gpu() else { return };
    let x = tensor(&[8, 5], 60).to(&device).unwrap();
    let y = tensor(&[8, 3], 61).to(&device).unwrap();
    let step = |w: &DynTensor, adam: &mut Adam| {
        let loss = mse_loss(&x.matmul(w).unwrap(), &y, Reduction::Mean).unwrap();
        let mut grads = loss.backward().unwrap();
        let _no_grad = no_grad();
        adam.step(&mut grads).unwrap();
    };
    let start = tensor(&[5, 3], 62);
    let w = start.to(&device).unwrap().requires_grad_().unwrap();
    let mut adam = Adam::new(vec![w.clone()], AdamConfig::adam()).unwrap();
    step(&w, &mut adam);
    step(&w, &mut adam);
    // a snapshot (host copies, as a checkpoint holds them) restored into a new optimizer
    let snapshot = adam.state_dict().unwrap();
    let resumed_w = w
        .detach()
        .to(&Device::Cpu)
        .unwrap()
        .to(&device)
        .unwrap()
        .requires_grad_()
        .unwrap();
    let mut resumed = Adam::new(vec![resumed_w.clone()], AdamConfig::adam()).unwrap();
    resumed.load_state_dict(&snapshot).unwrap();
    step(&w, &mut adam);
    step(&resumed_w, &mut resumed);
    assert_close(
        "resumed Adam",
        &w.detach().to(&Device::Cpu).unwrap(),
        &resumed_w.detach(),
    );
}

/// `steps` Adam steps of a linear classifier on `device` (from `resume` when given): the
/// losses, and a checkpoint of the end.
fn train_linear(
    device: &Device,
    resume: Option<&rumus::io::Checkpoint>,
    steps: usize,
) -> (Vec<f64>, rumus::io::Checkpoint) {
    let model = {
        let _on = device.set_default();
        Linear::<12, 3>::new().unwrap()
    };
    let mut adam = Adam::new(model.parameters(), AdamConfig::default()).unwrap();
    if let Some(checkpoint) = resume {
        checkpoint.restore(&model, &mut adam).unwrap();
    }
    let x = tensor(&[16, 12], 50).to(device).unwrap();
    let labels = DynTensor::from_vec((0..16).map(|i| i % 3).collect::<Vec<i64>>(), &[16]).unwrap();
    let mut losses = Vec::new();
    for _ in 0..steps {
        let logits = model.forward_dyn(&x).unwrap();
        let loss = cross_entropy(&logits, &labels, &CrossEntropyOptions::default()).unwrap();
        losses.push(loss.item::<f32>().unwrap() as f64);
        let mut grads = loss.backward().unwrap();
        let _no_grad = no_grad();
        adam.step(&mut grads).unwrap();
    }
    let checkpoint = rumus::io::Checkpoint::capture(&model, &adam, None, 0, steps as u64).unwrap();
    (losses, checkpoint)
}

#[test]
fn a_checkpoint_written_on_the_gpu_resumes_on_the_cpu_and_on_either_gpu_backend() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let (_, written) = train_linear(&device, None, 3);
    let file = written.to_bytes().unwrap();
    let read = rumus::io::Checkpoint::from_bytes(&file, "written on the GPU").unwrap();
    let (on_cpu, _) = train_linear(&Device::Cpu, Some(&read), 3);
    let (on_gpu, _) = train_linear(&device, Some(&read), 3);
    let close = |a: &[f64], b: &[f64], what: &str| {
        for (x, y) in a.iter().zip(b) {
            assert!(
                (x - y).abs() <= 1e-5 + 1e-4 * x.abs(),
                "{what}: {a:?} against {b:?}"
            );
        }
    };
    close(&on_cpu, &on_gpu, "resumed on the CPU and on the GPU");
    // A checkpoint written on CUDA resumes on wgpu too, where the machine has both.
    if device.is_cuda()
        && let Ok(wgpu) = Device::gpu()
    {
        let (on_wgpu, _) = train_linear(&wgpu, Some(&read), 3);
        close(&on_cpu, &on_wgpu, "resumed on the CPU and on wgpu");
    }
}
