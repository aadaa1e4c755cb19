//! GPU workloads timed next to PyTorch-CUDA by `tests/bench/compare_gpu.py`. Prints one
//! `name value unit` line per workload: matrix products in GFLOP/s, training steps in
//! milliseconds (the mean over a run of steps, with one wait at the end, as a training loop
//! runs).
//!
//! ```text
//! cargo run --release --example bench_gpu            # every workload
//! cargo run --release --example bench_gpu hgemm      # the matrix products alone
//! cargo run --release --example bench_gpu layouts    # and f16 with transposed operands, as
//!                                                    # they are and copied to row-major
//!                                                    # (at 4096 and GPT-2 small's layers)
//! cargo run --release --example bench_gpu ops        # each op of one encoder block
//! cargo run --release --example bench_gpu profile    # GPU time per kernel of one step
//!                                                    # (`profile autocast`, `profile bf16`,
//!                                                    # `profile gpt`, `profile gpt bf16`,
//!                                                    # `profile attention`)
//! cargo run --release --example bench_gpu steps      # the products, MLP and CNN steps
//! cargo run --release --example bench_gpu gpt        # the GPT-2-small step alone
//! cargo run --release --example bench_gpu attention  # causal attention, T = 4096, f32 and autocast
//! cargo run --release --example bench_gpu cuda hgemm # any of these on the CUDA device
//! ```

use std::time::Instant;

use rumus::amp::{GradScaler, autocast, autocast_with};
use rumus::nn::{
    CrossEntropyOptions, Linear, Module, Reduction, TransformerEncoderBlock, cross_entropy,
    mse_loss,
};
use rumus::ops::attention::SdpaOptions;
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::{D, Dyn, Tensor};
use rumus::{DType, Device, DynTensor, no_grad};

/// conv32-pool-conv64-pool-fc128-fc10 on 28x28 images (the MNIST example's network).
#[path = "mnist/model.rs"]
mod mnist_model;

/// GPT-2 small (the `gpt` example's decoder; its tiny size is unused here).
#[path = "gpt/model.rs"]
#[allow(dead_code)]
mod gpt_model;

/// The encoder of the GPU benchmark: six pre-norm blocks, d = 512, 8 heads, FF 2048.
struct Encoder {
    blocks: Vec<TransformerEncoderBlock<512, 8, 2048>>,
}

/// Seconds per call of `f` over `reps` calls after `warmup`, waiting for the GPU at the end.
fn seconds_per_call(device: &Device, warmup: usize, reps: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..warmup {
        f();
    }
    device.synchronize().expect("GPU wait");
    let start = Instant::now();
    for _ in 0..reps {
        f();
    }
    device.synchronize().expect("GPU wait");
    start.elapsed().as_secs_f64() / reps as f64
}

/// Seconds per call of `f` over at least a second of calls, after at least `warm_calls` of
/// them and a quarter of a second: a fixed count of 1 ms products was over in 20 ms, before
/// the GPU's clocks settle, and a train step's first calls compile its kernels (a step whose
/// optimizer is skipped for an overflow compiles the optimizer's later), which a count of
/// ten steps once put inside the timing.
fn seconds_per_call_settled(device: &Device, warm_calls: usize, mut f: impl FnMut()) -> f64 {
    let warm = Instant::now();
    let mut calls = 0;
    while calls < warm_calls || warm.elapsed().as_secs_f64() < 0.25 {
        f();
        device.synchronize().expect("GPU wait");
        calls += 1;
    }
    let probe = seconds_per_call(device, 0, 1, &mut f);
    let reps = (1.0 / probe).ceil().max(3.0) as usize;
    seconds_per_call(device, 0, reps, f)
}

/// GFLOP/s of an `n x n x n` product of `dtype` operands (f16 products accumulate in f32).
fn matmul_rate(device: &Device, n: usize, dtype: DType) -> f64 {
    matmul_rate_of_layouts(device, (n, n, n), dtype, [false, false], false)
}

/// The rate of an `m x k x n` product (`mkn`) with either operand a transposed view
/// (column-major), as a linear layer's products read them: `x @ W^T` forward, `g^T @ x` for
/// the weight's gradient. With `copied`, each transposed operand is first copied into a
/// row-major tensor inside the timed call (the rate still counts the product's operations
/// only): whether such a copy pays for a kernel that is faster on row-major operands.
fn matmul_rate_of_layouts(
    device: &Device,
    (m, k, n): (usize, usize, usize),
    dtype: DType,
    transposed: [bool; 2],
    copied: bool,
) -> f64 {
    let operand = |(rows, cols): (usize, usize), transposed: bool| {
        let dims = if transposed {
            [cols, rows]
        } else {
            [rows, cols]
        };
        let stored = DynTensor::randn(&dims, DType::F32)
            .unwrap()
            .to(device)
            .unwrap()
            .to_dtype(dtype)
            .unwrap();
        if transposed {
            stored.transpose(0, 1).unwrap()
        } else {
            stored
        }
    };
    let (a, b) = (
        operand((m, k), transposed[0]),
        operand((k, n), transposed[1]),
    );
    let row_major = |x: &DynTensor, transposed: bool| {
        if copied && transposed {
            x.contiguous().unwrap()
        } else {
            x.clone()
        }
    };
    let s = seconds_per_call_settled(device, 1, || {
        row_major(&a, transposed[0])
            .matmul(&row_major(&b, transposed[1]))
            .unwrap();
    });
    2.0 * (m * k * n) as f64 / s / 1e9
}

/// `bench_gpu layouts`: the f16 product at `n` with either operand column-major, as is and
/// copied to row-major first, then the same for GPT-2 small's linear layers at a batch of
/// 8 x 1,024 tokens (`shrink` divides their sizes, for a slow adapter): each layer's
/// forward product `x @ W^T`, its input gradient `g @ W` and its weight gradient `g^T @ x`.
fn print_layouts(device: &Device, n: usize, shrink: usize) {
    for (name, transposed) in [
        ("ab_t", [false, true]),
        ("at_b", [true, false]),
        ("at_b_t", [true, true]),
    ] {
        for copied in [false, true] {
            let rate = matmul_rate_of_layouts(device, (n, n, n), DType::F16, transposed, copied);
            let suffix = if copied { "_copied" } else { "" };
            println!("hgemm_{n}_{name}{suffix} {rate:.1} GFLOP/s");
        }
    }
    let tokens = 8 * 1024 / shrink;
    // (name, inputs, outputs) of the layers of one block, and the tied output layer.
    let layers = [
        ("qkv", 768, 2304),
        ("proj", 768, 768),
        ("fc", 768, 3072),
        ("fc_proj", 3072, 768),
        ("logits", 768, 50304),
    ];
    for (layer, inputs, outputs) in layers {
        let (inputs, outputs) = (inputs / shrink, outputs / shrink);
        let products = [
            ("forward", (tokens, inputs, outputs), [false, true]),
            ("input_grad", (tokens, outputs, inputs), [false, false]),
            ("weight_grad", (outputs, tokens, inputs), [true, false]),
        ];
        for (product, mkn, transposed) in products {
            let copies: &[bool] = if transposed.contains(&true) {
                &[false, true]
            } else {
                &[false]
            };
            for &copied in copies {
                let rate = matmul_rate_of_layouts(device, mkn, DType::F16, transposed, copied);
                let suffix = if copied { "_copied" } else { "" };
                println!("hgemm_gpt2_{layer}_{product}{suffix} {rate:.1} GFLOP/s");
            }
        }
    }
}

fn mlp_step(device: &Device, batch: usize) -> f64 {
    let (l1, l2, l3) = {
        let _on = device.set_default();
        (
            Linear::<784, 1024>::new().unwrap(),
            Linear::<1024, 1024>::new().unwrap(),
            Linear::<1024, 10>::new().unwrap(),
        )
    };
    let mut params = l1.parameters();
    params.extend(l2.parameters());
    params.extend(l3.parameters());
    let mut adam = Adam::new(params, AdamConfig::default()).unwrap();
    let x = DynTensor::randn(&[batch, 784], DType::F32)
        .unwrap()
        .to(device)
        .unwrap();
    let labels =
        DynTensor::from_vec((0..batch as i64).map(|i| i % 10).collect(), &[batch]).unwrap();
    let s = seconds_per_call_settled(device, 3, || {
        let h = l1.forward_dyn(&x).unwrap().relu().unwrap();
        let h = l2.forward_dyn(&h).unwrap().relu().unwrap();
        let logits = l3.forward_dyn(&h).unwrap();
        train(
            &mut adam,
            cross_entropy(&logits, &labels, &CrossEntropyOptions::default()),
        );
    });
    s * 1e3
}

/// One step: `loss`, backward, Adam.
fn train(adam: &mut Adam, loss: rumus::Result<DynTensor>) {
    let mut grads = loss
        .expect("forward and loss")
        .backward()
        .expect("backward");
    let _no_grad = no_grad();
    adam.step(&mut grads).expect("step");
}

fn labels(batch: usize) -> DynTensor {
    DynTensor::from_vec((0..batch as i64).map(|i| i % 10).collect(), &[batch]).unwrap()
}

fn cnn_step(device: &Device, batch: usize) -> f64 {
    let model = {
        let _on = device.set_default();
        mnist_model::Cnn::new().unwrap()
    };
    let mut adam = Adam::new(model.parameters(), AdamConfig::default()).unwrap();
    let x: Tensor<(Dyn, D<1>, D<28>, D<28>)> = DynTensor::randn(&[batch, 1, 28, 28], DType::F32)
        .unwrap()
        .to(device)
        .unwrap()
        .try_shape()
        .unwrap();
    let y = labels(batch);
    let options = CrossEntropyOptions::default();
    let s = seconds_per_call_settled(device, 3, || {
        let loss = model
            .forward(&x)
            .and_then(|logits| cross_entropy(logits.as_dyn(), &y, &options));
        train(&mut adam, loss);
    });
    s * 1e3
}

/// The transformer workload: six encoder blocks, Adam, an MSE loss on `[32, 256, 512]`.
struct TransformerBench {
    encoder: Encoder,
    adam: Adam,
    x: DynTensor,
    target: DynTensor,
}

impl TransformerBench {
    fn new(device: &Device) -> Self {
        let encoder = {
            let _on = device.set_default();
            Encoder {
                blocks: (0..6)
                    .map(|_| TransformerEncoderBlock::new().unwrap())
                    .collect(),
            }
        };
        let params: Vec<DynTensor> = encoder.blocks.iter().flat_map(|b| b.parameters()).collect();
        let adam = Adam::new(params, AdamConfig::default()).unwrap();
        let on = |dims: &[usize]| {
            DynTensor::randn(dims, DType::F32)
                .unwrap()
                .to(device)
                .unwrap()
        };
        TransformerBench {
            encoder,
            adam,
            x: on(&[32, 256, 512]),
            target: on(&[32, 256, 512]),
        }
    }

    fn forward(&self) -> DynTensor {
        let mut h = self.x.clone();
        for block in &self.encoder.blocks {
            h = block.forward_dyn(&h, None, false).unwrap();
        }
        h
    }

    fn step(&mut self) {
        let loss = mse_loss(&self.forward(), &self.target, Reduction::Mean);
        train(&mut self.adam, loss);
    }

    /// A step as PyTorch's mixed precision runs it: the forward pass under autocast, the
    /// loss scaled, the step skipped on an overflow.
    fn step_autocast(&mut self, scaler: &mut GradScaler) {
        let loss = {
            let _autocast = autocast();
            mse_loss(&self.forward(), &self.target, Reduction::Mean).expect("forward and loss")
        };
        let mut grads = scaler
            .scale(&loss)
            .and_then(|scaled| scaled.backward())
            .expect("backward");
        scaler.step(&mut self.adam, &mut grads).expect("step");
        scaler.update();
    }

    /// A step under bf16 autocast, which needs no loss scaling.
    fn step_bf16(&mut self) {
        let loss = {
            let _autocast = autocast_with(DType::BF16).expect("bf16 autocast");
            mse_loss(&self.forward(), &self.target, Reduction::Mean)
        };
        train(&mut self.adam, loss);
    }
}

/// The transformer's times in milliseconds.
struct TransformerTimes {
    step: f64,
    forward: f64,
    /// Under f16 autocast with loss scaling.
    autocast: f64,
    /// Under bf16 autocast (devices with bf16 kernels: the CPU and CUDA).
    bf16: Option<f64>,
}

fn transformer_step(device: &Device) -> TransformerTimes {
    let mut bench = TransformerBench::new(device);
    let step = seconds_per_call_settled(device, 5, || bench.step());
    let forward_only = seconds_per_call_settled(device, 3, || {
        let _no_grad = no_grad();
        bench.forward();
    });
    let mut scaler = GradScaler::new();
    let mixed = seconds_per_call_settled(device, 5, || bench.step_autocast(&mut scaler));
    let bf16 = has_bf16(device).then(|| seconds_per_call_settled(device, 5, || bench.step_bf16()));
    TransformerTimes {
        step: step * 1e3,
        forward: forward_only * 1e3,
        autocast: mixed * 1e3,
        bf16: bf16.map(|s| s * 1e3),
    }
}

/// Whether `device` has bf16 kernels (WGSL has no bfloat16).
fn has_bf16(device: &Device) -> bool {
    !matches!(device, Device::Gpu(_))
}

/// Causal attention forward and backward on `[4, 8, 4096, 64]` f32 (fused), under autocast in
/// `autocast` if given: milliseconds per call and the growth of the buffer pool's high-water
/// mark in MiB.
fn attention_step(device: &Device, autocast: Option<DType>) -> (f64, f64) {
    let step = attention_call(device, autocast);
    let ((), grown) = memory_growth_mib(device, &step);
    (seconds_per_call_settled(device, 3, step) * 1e3, grown)
}

/// A call of causal attention, forward and backward, on three [4, 8, 4096, 64] leaves.
fn attention_call(device: &Device, autocast: Option<DType>) -> impl Fn() + use<> {
    let leaf = || {
        DynTensor::randn(&[4, 8, 4096, 64], DType::F32)
            .unwrap()
            .to(device)
            .unwrap()
            .requires_grad_()
            .unwrap()
    };
    let (q, k, v) = (leaf(), leaf(), leaf());
    let options = SdpaOptions {
        causal: true,
        ..Default::default()
    };
    move || {
        let out = {
            let _autocast = autocast.map(|dtype| autocast_with(dtype).unwrap());
            q.scaled_dot_product_attention(&k, &v, options).unwrap()
        };
        out.sum_all().unwrap().backward().unwrap();
    }
}

/// GPT-2 small training on random tokens under f16 autocast with loss scaling, AdamW, batches
/// of 8 x 1,024 tokens.
struct GptBench {
    model: gpt_model::Gpt2Small,
    adamw: Adam,
    scaler: GradScaler,
    tokens: Vec<i64>,
    rng: rumus::rng::Generator,
    device: Device,
}

/// A phase of a step: its name, host milliseconds, reads from the GPU and buffers made.
type Phase = (&'static str, (f64, u64, u64));

impl GptBench {
    const BATCH: usize = 8;
    const CONTEXT: usize = 1024;

    fn new(device: &Device) -> Self {
        let model = {
            let _on = device.set_default();
            gpt_model::Gpt2Small::new(12).expect("GPT-2 small")
        };
        let config = AdamConfig {
            lr: 3e-4,
            weight_decay: 0.1,
            ..AdamConfig::adamw()
        };
        let adamw = Adam::new(model.parameters(), config).expect("AdamW");
        let mut rng = rumus::rng::Generator::new(3);
        let tokens = (0..1 << 16).map(|_| rng.below(50257) as i64).collect();
        GptBench {
            model,
            adamw,
            scaler: GradScaler::new(),
            tokens,
            rng,
            device: device.clone(),
        }
    }

    fn batch(&mut self) -> (DynTensor, DynTensor) {
        let shape = (Self::BATCH, Self::CONTEXT);
        gpt_model::sample_batch(&self.tokens, shape, &mut self.rng, &self.device).expect("a batch")
    }

    fn step(&mut self) {
        let batch = self.batch();
        let scaler = Some(&mut self.scaler);
        self.model
            .train_step(&mut self.adamw, scaler, (&batch.0, &batch.1))
            .expect("a step");
    }

    /// A step under bf16 autocast (no loss scaling).
    fn step_bf16(&mut self) {
        let (inputs, targets) = self.batch();
        let loss = {
            let _autocast = autocast_with(DType::BF16).expect("bf16 autocast");
            self.model.loss(&inputs, &targets).expect("forward")
        };
        let mut grads = loss.backward().expect("backward");
        self.adamw.step(&mut grads).expect("step");
    }

    /// One step with the host's time in each phase, in ms, and the reads from the GPU it
    /// made (each waits for the GPU's queue): batch, forward and loss, backward, scaled
    /// optimizer step, the final wait. `None` off wgpu, whose counters these are.
    fn phases(&mut self) -> Option<[Phase; 5]> {
        use rumus::backend::gpu::transfer_counts;
        let Device::Gpu(gpu) = self.device.clone() else {
            return None;
        };
        let counts = || (transfer_counts().downloads, gpu.memory().created);
        let (mut clock, mut last) = (Instant::now(), counts());
        let mut lap = || {
            let ms = clock.elapsed().as_secs_f64() * 1e3;
            let now = counts();
            let made = (now.0 - last.0, now.1 - last.1);
            (clock, last) = (Instant::now(), now);
            (ms, made.0, made.1)
        };
        let (inputs, targets) = self.batch();
        let batch = lap();
        let loss = {
            let _autocast = autocast();
            self.model.loss(&inputs, &targets).expect("forward")
        };
        let forward = lap();
        let mut grads = self
            .scaler
            .scale(&loss)
            .and_then(|l| l.backward())
            .expect("backward");
        let backward = lap();
        self.scaler.step(&mut self.adamw, &mut grads).expect("step");
        self.scaler.update();
        let step = lap();
        self.device.synchronize().expect("GPU wait");
        let wait = lap();
        Some([
            ("batch", batch),
            ("forward", forward),
            ("backward", backward),
            ("step", step),
            ("wait", wait),
        ])
    }
}

/// GPT-2 small's training under f16 autocast with loss scaling (`bf16` false) or under bf16
/// autocast: tokens per second and the buffer pool's high-water mark in MiB (model,
/// optimizer state and activations, counted from an empty pool).
fn gpt2_small_step(device: &Device, bf16: bool) -> (f64, f64) {
    let (seconds, peak) = memory_growth_mib(device, || {
        let mut bench = GptBench::new(device);
        if bf16 {
            seconds_per_call_settled(device, 3, || bench.step_bf16())
        } else {
            seconds_per_call_settled(device, 3, || bench.step())
        }
    });
    ((GptBench::BATCH * GptBench::CONTEXT) as f64 / seconds, peak)
}

/// `f`'s result and how far memory in use rose above its level before `f`, in MiB: the wgpu
/// buffer pool's high-water mark, or elsewhere that of the bytes of live tensor storages
/// (what PyTorch's `max_memory_allocated` counts).
fn memory_growth_mib<R>(device: &Device, f: impl FnOnce() -> R) -> (R, f64) {
    let mib = |bytes: f64| bytes / (1u64 << 20) as f64;
    if let Device::Gpu(gpu) = device {
        gpu.release_pooled();
        gpu.reset_memory_peak();
        let before = gpu.memory().in_use_peak;
        let result = f();
        device.synchronize().expect("GPU wait");
        return (result, mib((gpu.memory().in_use_peak - before) as f64));
    }
    let before = rumus::storage::live_storage_bytes();
    let peak = rumus::storage::StoragePeak::start();
    let result = f();
    device.synchronize().expect("GPU wait");
    (result, mib(peak.bytes().saturating_sub(before) as f64))
}

/// GPU time of each kernel entry point in one train step (`bench_gpu profile`): the
/// transformer's, under autocast with `profile autocast`, or GPT-2 small's with `profile gpt`.
fn step_profile(device: &Device) -> rumus::Result<()> {
    let profile = |on: bool| match device {
        Device::Gpu(gpu) => gpu.profile_kernels(on),
        Device::Cuda(cuda) => cuda.profile_kernels(on),
        Device::Cpu => Ok(()),
    };
    let kernel_times = || -> rumus::Result<Vec<(String, rumus::backend::KernelTime)>> {
        Ok(match device {
            Device::Gpu(gpu) => gpu
                .kernel_times()?
                .into_iter()
                .map(|(entry, time)| (entry.to_string(), time))
                .collect(),
            Device::Cuda(cuda) => cuda.kernel_times()?,
            Device::Cpu => Vec::new(),
        })
    };
    let arg = |name: &str| std::env::args().any(|a| a == name);
    let mut step: Box<dyn FnMut()> = if arg("gpt") {
        let mut bench = GptBench::new(device);
        if arg("bf16") {
            Box::new(move || bench.step_bf16())
        } else {
            Box::new(move || bench.step())
        }
    } else if arg("attention") {
        Box::new(attention_call(device, Some(DType::BF16)))
    } else {
        let mut bench = TransformerBench::new(device);
        let (mixed, mut scaler) = (arg("autocast"), GradScaler::new());
        let bf16 = arg("bf16");
        Box::new(move || {
            if bf16 {
                bench.step_bf16()
            } else if mixed {
                bench.step_autocast(&mut scaler)
            } else {
                bench.step()
            }
        })
    };
    step();
    let wall = seconds_per_call(device, 1, 1, &mut step);
    profile(true)?;
    step();
    let times = kernel_times()?;
    profile(false)?;
    if arg("gpt") {
        drop(step);
        let mut bench = GptBench::new(device);
        for _ in 0..3 {
            bench.step();
        }
        // (wgpu only: the counters are its own)
        if let Some(phases) = bench.phases() {
            let line: Vec<String> = phases
                .iter()
                .map(|(name, (ms, reads, made))| {
                    format!("{name} {ms:.1} ({reads} reads, {made} buffers made)")
                })
                .collect();
            println!("host time of a step's phases, ms: {}", line.join(", "));
        }
    }
    let total: f64 = times.iter().map(|(_, t)| t.seconds).sum();
    println!(
        "kernel time of one step: {:.3} ms (wall time of a step: {:.3} ms)",
        total * 1e3,
        wall * 1e3
    );
    for (entry, time) in times {
        println!(
            "{entry:<28} {:>5} dispatches {:>8.3} ms {:>5.1}%",
            time.dispatches,
            time.seconds * 1e3,
            100.0 * time.seconds / total
        );
    }
    Ok(())
}

/// Milliseconds of each op of one encoder block's forward pass at the benchmark's sizes
/// (`bench_gpu ops`): where the transformer step's time goes.
fn transformer_ops(device: &Device) {
    let on = |dims: &[usize]| {
        DynTensor::randn(dims, DType::F32)
            .unwrap()
            .to(device)
            .unwrap()
    };
    let _no_grad = no_grad();
    let x = on(&[32, 256, 512]);
    let w_in = on(&[1536, 512]);
    let w_ff = on(&[2048, 512]);
    let gamma = on(&[512]);
    let q = on(&[32, 256, 512])
        .reshape(&[32, 256, 8, 64])
        .unwrap()
        .transpose(1, 2)
        .unwrap();
    let k = on(&[32, 8, 256, 64]);
    let scores = on(&[32, 8, 256, 256]);
    let ms = |name: &str, f: &mut dyn FnMut()| {
        let s = seconds_per_call(device, 2, 20, f);
        println!("op_{name} {:.3} ms", s * 1e3);
    };
    ms("in_proj [8192,512]@[512,1536]^T", &mut || {
        x.matmul(&w_in.transpose(0, 1).unwrap()).unwrap();
    });
    ms("ff1 [8192,512]@[512,2048]^T", &mut || {
        x.matmul(&w_ff.transpose(0, 1).unwrap()).unwrap();
    });
    let grad_in = on(&[8192, 1536]);
    let x_rows = x.reshape(&[8192, 512]).unwrap();
    ms("weight grad g^T@x [1536,8192]@[8192,512]", &mut || {
        grad_in.transpose(0, 1).unwrap().matmul(&x_rows).unwrap();
    });
    ms("scale strided q", &mut || {
        q.mul_scalar(0.125).unwrap();
    });
    ms("q@k^T [256 x 256x64@64x256]", &mut || {
        q.matmul(&k.transpose(-1, -2).unwrap()).unwrap();
    });
    ms("softmax [65536 x 256]", &mut || {
        scores.softmax(-1).unwrap();
    });
    ms("dropout [32,8,256,256]", &mut || {
        rumus::nn::functional::dropout(&scores, 0.1, true).unwrap();
    });
    ms("attn@v [256 x 256x256@256x64]", &mut || {
        scores.matmul(&k).unwrap();
    });
    ms("merge heads copy", &mut || {
        q.contiguous().unwrap();
    });
    ms("layer_norm [8192,512]", &mut || {
        rumus::nn::functional::layer_norm(&x, Some(&gamma), Some(&gamma), 1e-5).unwrap();
    });
    ms("add [32,256,512]", &mut || {
        x.add(&x).unwrap();
    });
    ms("relu [32,8,256,256]", &mut || {
        scores.relu().unwrap();
    });
    drop(_no_grad);
    // Forward and backward of the two row kernels, the gradient of a plain sum.
    let leaf = |t: &DynTensor| t.detach().requires_grad_().unwrap();
    let (x, gamma, scores) = (leaf(&x), leaf(&gamma), leaf(&scores));
    ms("layer_norm fwd+bwd [8192,512]", &mut || {
        let y = rumus::nn::functional::layer_norm(&x, Some(&gamma), Some(&gamma), 1e-5).unwrap();
        y.sum_all().unwrap().backward().unwrap();
    });
    ms("softmax fwd+bwd [65536 x 256]", &mut || {
        scores
            .softmax(-1)
            .unwrap()
            .sum_all()
            .unwrap()
            .backward()
            .unwrap();
    });
    // The feed-forward activation and its dropout as two ops, then as one each way
    // (`activation_dropout`, as `TransformerEncoderBlock` runs them).
    let hidden = leaf(&on(&[8192, 2048]));
    ms("gelu then dropout fwd+bwd [8192,2048]", &mut || {
        let y = rumus::nn::functional::dropout(&hidden.gelu().unwrap(), 0.1, true).unwrap();
        y.sum_all().unwrap().backward().unwrap();
    });
    ms("activation_dropout(gelu) fwd+bwd [8192,2048]", &mut || {
        let y = rumus::nn::functional::activation_dropout(
            &hidden,
            rumus::ops::UnaryOp::Gelu,
            0.1,
            true,
        )
        .unwrap();
        y.sum_all().unwrap().backward().unwrap();
    });
    // The encoder's attention (`[32, 8, 256, 64]`, dropout 0.1) under autocast, forward and
    // backward: the fused kernels against the composite form (products, softmax, dropout),
    // the choice `FUSED_MIN_LENGTH` in nn/attention.rs makes.
    let [q, k, v] = [1, 2, 3].map(|_| leaf(&on(&[32, 8, 256, 64])));
    for causal in [false, true] {
        ms(
            &format!("attention fused autocast dropout causal={causal}"),
            &mut || {
                let _autocast = autocast();
                let options = SdpaOptions {
                    key_padding_mask: None,
                    causal,
                    scale: None,
                    dropout_p: 0.1,
                };
                let out = q.scaled_dot_product_attention(&k, &v, options).unwrap();
                out.sum_all().unwrap().backward().unwrap();
            },
        );
    }
    ms("attention composite autocast dropout", &mut || {
        let _autocast = autocast();
        let scores = q
            .matmul(&k.transpose(-1, -2).unwrap())
            .unwrap()
            .mul_scalar(0.125)
            .unwrap();
        let attention = rumus::nn::functional::dropout(&scores.softmax(-1).unwrap(), 0.1, true);
        let out = attention.unwrap().matmul(&v).unwrap();
        out.sum_all().unwrap().backward().unwrap();
    });
}

fn main() -> rumus::Result<()> {
    // `cuda`: every workload on the first CUDA device instead of wgpu's adapter.
    let device = if std::env::args().any(|a| a == "cuda") {
        Device::cuda()?
    } else {
        Device::gpu()?
    };
    match &device {
        Device::Gpu(gpu) => eprintln!("adapter: {} ({})", gpu.name(), gpu.backend()),
        other => eprintln!("device: {other}"),
    }
    if std::env::args().any(|a| a == "ops") {
        transformer_ops(&device);
        return Ok(());
    }
    if std::env::args().any(|a| a == "profile") {
        return step_profile(&device);
    }
    let print_gpt = || {
        let (tokens, memory) = gpt2_small_step(&device, false);
        println!("gpt2_small_autocast {tokens:.0} tokens/s");
        println!("gpt2_small_memory {memory:.0} MiB");
        if has_bf16(&device) {
            let (tokens, memory) = gpt2_small_step(&device, true);
            println!("gpt2_small_bf16 {tokens:.0} tokens/s");
            println!("gpt2_small_bf16_memory {memory:.0} MiB");
        }
    };
    let print_attention = || {
        let (attention, memory) = attention_step(&device, None);
        println!("attention_t4096 {attention:.3} ms");
        println!("attention_t4096_memory {memory:.1} MiB");
        let (attention, _) = attention_step(&device, Some(DType::F16));
        println!("attention_t4096_autocast {attention:.3} ms");
        if has_bf16(&device) {
            let (attention, _) = attention_step(&device, Some(DType::BF16));
            println!("attention_t4096_bf16 {attention:.3} ms");
        }
    };
    if std::env::args().any(|a| a == "gpt") {
        print_gpt();
        return Ok(());
    }
    let print_transformer = || {
        let times = transformer_step(&device);
        println!("transformer_step {:.3} ms", times.step);
        println!("transformer_forward {:.3} ms", times.forward);
        println!("transformer_step_autocast {:.3} ms", times.autocast);
        if let Some(bf16) = times.bf16 {
            println!("transformer_step_bf16 {bf16:.3} ms");
        }
    };
    // `transformer`: the encoder's step in f32 and under autocast, and its forward pass.
    if std::env::args().any(|a| a == "transformer") {
        print_transformer();
        return Ok(());
    }
    if std::env::args().any(|a| a == "attention") {
        print_attention();
        return Ok(());
    }
    // `small`: a quick run of every workload but the transformer on a slow adapter.
    let small = std::env::args().any(|a| a == "small");
    let (sizes, batch): (&[usize], usize) = if small {
        (&[256], 8)
    } else {
        (&[2048, 4096, 8192], 256)
    };
    for &n in sizes {
        println!(
            "sgemm_{n} {:.1} GFLOP/s",
            matmul_rate(&device, n, DType::F32)
        );
    }
    if let Device::Gpu(gpu) = &device {
        let path = if gpu.has_tensor_matmul() {
            "cooperative matrices with VK_NV_cooperative_matrix2"
        } else if gpu.has_coop_matmul() {
            "cooperative matrices"
        } else {
            "tiled kernels"
        };
        eprintln!("f16 products: {path}");
    }
    for &n in sizes {
        println!(
            "hgemm_{n} {:.1} GFLOP/s",
            matmul_rate(&device, n, DType::F16)
        );
    }
    // `hgemm`: the matrix products alone; `layouts`: then the f16 products with either
    // operand column-major (256 and GPT-2's sizes / 16 with `small`).
    if std::env::args().any(|a| a == "layouts") {
        let (n, shrink) = if small { (256, 16) } else { (4096, 1) };
        print_layouts(&device, n, shrink);
    }
    if std::env::args().any(|a| a == "hgemm" || a == "layouts") {
        return Ok(());
    }
    println!("mlp_step_b{batch} {:.3} ms", mlp_step(&device, batch));
    println!("cnn_step_b{batch} {:.3} ms", cnn_step(&device, batch));
    // `steps`: the products, then the MLP and CNN steps alone (where the host's time per op
    // shows).
    if !small && !std::env::args().any(|a| a == "steps") {
        print_transformer();
        print_attention();
        print_gpt();
    }
    Ok(())
}
