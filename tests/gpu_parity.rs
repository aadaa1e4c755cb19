//! The GPU backend against the CPU backend: every op with a GPU kernel gives the CPU's values
//! (the CPU is itself checked against PyTorch and finite differences), gradients flow through
//! GPU graphs and device copies, a training step runs without fallback transfers, and large
//! tensors (beyond 65,535 workgroups in one dimension) work.
//!
//! Without a GPU these tests run on Mesa's lavapipe (`apt-get install mesa-vulkan-drivers`);
//! they say they were skipped when no adapter exists, and fail instead when
//! `RUMUS_REQUIRE_GPU=1` (CI sets it). Every test holds `serial()`: some count transfers,
//! which are process-wide, so no other test may read back meanwhile.

mod common;

use common::gpu::{TinyMlp, assert_close, check, gpu, serial, tensor};
use rumus::backend::gpu::transfer_counts;
use rumus::io::Checkpoint;
use rumus::nn::{CrossEntropyOptions, cross_entropy};
use rumus::nn::{Linear, Module};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::{DType, Device, DynTensor};

type UnaryCase = Box<dyn Fn(&DynTensor) -> DynTensor>;

#[test]
fn unary_ops_match_the_cpu() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let x = tensor(&[7, 33], 1);
    let positive = x.abs().unwrap().add_scalar(0.1).unwrap();
    let cases: Vec<(&str, UnaryCase)> = vec![
        ("neg", Box::new(|t| t.neg().unwrap())),
        ("exp", Box::new(|t| t.exp().unwrap())),
        ("abs", Box::new(|t| t.abs().unwrap())),
        ("sign", Box::new(|t| t.sign().unwrap())),
        ("erf", Box::new(|t| t.erf().unwrap())),
        ("sin", Box::new(|t| t.sin().unwrap())),
        ("cos", Box::new(|t| t.cos().unwrap())),
        (
            "floor",
            Box::new(|t| t.mul_scalar(3.0).unwrap().floor().unwrap()),
        ),
        ("log1p", Box::new(|t| t.abs().unwrap().log1p().unwrap())),
        ("relu", Box::new(|t| t.relu().unwrap())),
        ("leaky_relu", Box::new(|t| t.leaky_relu(0.1).unwrap())),
        ("sigmoid", Box::new(|t| t.sigmoid().unwrap())),
        ("tanh", Box::new(|t| t.tanh().unwrap())),
        ("gelu", Box::new(|t| t.gelu().unwrap())),
        ("gelu_tanh", Box::new(|t| t.gelu_tanh().unwrap())),
        ("silu", Box::new(|t| t.silu().unwrap())),
        ("softplus", Box::new(|t| t.softplus(1.0, 20.0).unwrap())),
        ("powf 3", Box::new(|t| t.powf(3.0).unwrap())),
        ("clamp", Box::new(|t| t.clamp(-0.5, 0.7).unwrap())),
        ("add_scalar", Box::new(|t| t.add_scalar(1.5).unwrap())),
        ("mul_scalar", Box::new(|t| t.mul_scalar(-2.5).unwrap())),
    ];
    for (name, f) in &cases {
        check(name, &device, std::slice::from_ref(&x), |t| f(&t[0]));
        // a transposed (strided) view
        check(name, &device, std::slice::from_ref(&x), |t| {
            f(&t[0].transpose(0, 1).unwrap())
        });
    }
    for (name, f) in [
        (
            "log",
            DynTensor::log as fn(&DynTensor) -> rumus::Result<DynTensor>,
        ),
        ("sqrt", DynTensor::sqrt),
        ("rsqrt", DynTensor::rsqrt),
    ] {
        check(name, &device, std::slice::from_ref(&positive), |t| {
            f(&t[0]).unwrap()
        });
    }
}

#[test]
fn binary_ops_broadcast_like_the_cpu() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let a = tensor(&[4, 1, 5], 2);
    let b = tensor(&[3, 5], 3);
    let positive = tensor(&[4, 3, 5], 4)
        .abs()
        .unwrap()
        .add_scalar(0.5)
        .unwrap();
    for (name, f) in [
        (
            "add",
            DynTensor::add as fn(&DynTensor, &DynTensor) -> rumus::Result<DynTensor>,
        ),
        ("sub", DynTensor::sub),
        ("mul", DynTensor::mul),
        ("div", DynTensor::div),
    ] {
        check(name, &device, &[a.clone(), b.clone()], |t| {
            f(&t[0], &t[1]).unwrap()
        });
    }
    check("pow", &device, &[positive, b.clone()], |t| {
        t[0].pow(&t[1]).unwrap()
    });
    // a sliced, offset view against a broadcast row
    check(
        "narrowed add",
        &device,
        &[tensor(&[6, 9], 5), tensor(&[4], 6)],
        |t| t[0].narrow(1, 3, 4).unwrap().add(&t[1]).unwrap(),
    );
    // a host scalar joins a GPU op as a constant
    check("host scalar", &device, std::slice::from_ref(&b), |t| {
        t[0].mul(&DynTensor::scalar(3.0, DType::F32).unwrap())
            .unwrap()
    });
}

#[test]
fn masks_and_selection_match_the_cpu() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let a = tensor(&[5, 6], 7);
    let b = tensor(&[6], 8);
    check("where of gt", &device, &[a.clone(), b.clone()], |t| {
        DynTensor::where_(&t[0].gt(&t[1]).unwrap(), &t[0], &t[1]).unwrap()
    });
    check("masked_fill", &device, std::slice::from_ref(&a), |t| {
        t[0].masked_fill(&t[0].lt_scalar(0.0).unwrap(), -7.0)
            .unwrap()
    });
    check(
        "logical and/not as f32",
        &device,
        &[a.clone(), b.clone()],
        |t| {
            let m = t[0]
                .ge(&t[1])
                .unwrap()
                .logical_and(&t[0].le_scalar(1.0).unwrap())
                .unwrap();
            m.logical_not().unwrap().to_dtype(DType::F32).unwrap()
        },
    );
    check(
        "i64 compared with a scalar",
        &device,
        std::slice::from_ref(&a),
        |t| {
            t[0].mul_scalar(3.0)
                .unwrap()
                .to_dtype(DType::I64)
                .unwrap()
                .lt_scalar(0.5)
                .unwrap()
                .to_dtype(DType::F32)
                .unwrap()
        },
    );
    check("cast round trip", &device, std::slice::from_ref(&a), |t| {
        t[0].mul_scalar(3.0)
            .unwrap()
            .to_dtype(DType::I64)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap()
    });
}

#[test]
fn reductions_and_softmax_match_the_cpu() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let x = tensor(&[3, 70, 5], 9);
    check("sum all", &device, std::slice::from_ref(&x), |t| {
        t[0].sum_all().unwrap()
    });
    check("sum 0 2", &device, std::slice::from_ref(&x), |t| {
        t[0].sum(&[0, 2], true).unwrap()
    });
    // leading axes of a contiguous tensor: column sums in several passes
    check(
        "sum of leading axes",
        &device,
        &[tensor(&[40, 300, 7], 34)],
        |t| t[0].sum(&[0, 1], false).unwrap(),
    );
    // several groups of 32 columns, the last one partial
    check("column sums", &device, &[tensor(&[600, 70], 35)], |t| {
        t[0].sum(&[0], false).unwrap()
    });
    check("mean 1", &device, std::slice::from_ref(&x), |t| {
        t[0].mean(&[1], false).unwrap()
    });
    check("max -1", &device, std::slice::from_ref(&x), |t| {
        t[0].max(&[-1], false).unwrap()
    });
    check("min 1", &device, std::slice::from_ref(&x), |t| {
        t[0].min(&[1], true).unwrap()
    });
    check("argmax 1 as f32", &device, std::slice::from_ref(&x), |t| {
        t[0].argmax(1, false).unwrap().to_dtype(DType::F32).unwrap()
    });
    check("softmax last", &device, std::slice::from_ref(&x), |t| {
        t[0].softmax(-1).unwrap()
    });
    check("log_softmax 1", &device, std::slice::from_ref(&x), |t| {
        t[0].log_softmax(1).unwrap()
    });
    check("var", &device, std::slice::from_ref(&x), |t| {
        t[0].var(&[1], 1, false).unwrap()
    });
    // Row reductions run several short rows to a workgroup: rows shorter than a segment,
    // as long as one, and longer, with ties for the arg reductions (rounded values).
    for len in [1, 5, 64, 300, 1000] {
        let values = (0..37 * len)
            .map(|i| ((i * 7919) % 11) as f32 - 5.0)
            .collect();
        let rows = DynTensor::from_vec(values, &[37, len]).unwrap();
        type Reduction = fn(&DynTensor) -> DynTensor;
        let reductions: [(&str, Reduction); 5] = [
            ("sum", |t| t.sum(&[-1], false).unwrap()),
            ("max", |t| t.max(&[-1], false).unwrap()),
            ("min", |t| t.min(&[-1], false).unwrap()),
            ("argmax", |t| {
                t.argmax(-1, false).unwrap().to_dtype(DType::F32).unwrap()
            }),
            ("argmin", |t| {
                t.argmin(-1, false).unwrap().to_dtype(DType::F32).unwrap()
            }),
        ];
        for (name, reduce) in reductions {
            check(
                &format!("{name} of rows of {len}"),
                &device,
                std::slice::from_ref(&rows),
                |t| reduce(&t[0]),
            );
        }
    }
    // Rows longer than the 2048 elements a softmax keeps in registers, and a ragged tail.
    let long = tensor(&[3, 2500], 35).mul_scalar(8.0).unwrap();
    check(
        "softmax of long rows",
        &device,
        std::slice::from_ref(&long),
        |t| t[0].softmax(-1).unwrap(),
    );
    check("log_softmax of long rows", &device, &[long], |t| {
        t[0].log_softmax(-1).unwrap()
    });
}

#[test]
fn matrix_products_match_the_cpu() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let product = |t: &[DynTensor]| t[0].matmul(&t[1]).unwrap();
    let transposed = |t: &[DynTensor]| {
        let (a, b) = (
            t[0].transpose(-1, -2).unwrap(),
            t[1].transpose(-1, -2).unwrap(),
        );
        a.matmul(&b).unwrap()
    };
    // sizes that are not multiples of the 64x64 tile
    check(
        "2-d",
        &device,
        &[tensor(&[67, 45], 10), tensor(&[45, 130], 11)],
        product,
    );
    check(
        "transposed operands",
        &device,
        &[tensor(&[45, 67], 12), tensor(&[33, 45], 13)],
        transposed,
    );
    check(
        "broadcast batch",
        &device,
        &[tensor(&[2, 3, 9, 17], 14), tensor(&[3, 17, 5], 15)],
        product,
    );
    check(
        "vector",
        &device,
        &[tensor(&[8, 12], 16), tensor(&[12], 17)],
        product,
    );
    // a weight broadcast over a batch: folded into one product over all rows, unless the
    // batch does not step evenly over the rows
    check(
        "batch folded into rows",
        &device,
        &[tensor(&[4, 6, 10], 35), tensor(&[10, 7], 36)],
        product,
    );
    check(
        "batch that cannot fold",
        &device,
        &[tensor(&[6, 4, 10], 37), tensor(&[10, 7], 38)],
        |t| t[0].transpose(0, 1).unwrap().matmul(&t[1]).unwrap(),
    );
    // at least 128 output tiles of 128x128: the wide kernel, with ragged edges
    check(
        "wide 2-d",
        &device,
        &[tensor(&[2049, 9], 23), tensor(&[9, 1030], 24)],
        product,
    );
    check(
        "wide, several slices deep",
        &device,
        &[tensor(&[1030, 40], 27), tensor(&[40, 2049], 28)],
        product,
    );
    check(
        "wide batched, transposed",
        &device,
        &[tensor(&[2, 7, 1500], 25), tensor(&[2, 1500, 7], 26)],
        transposed,
    );
    // Operands `matmul_wide` reads as vectors (contiguous axis, other stride and extents
    // multiples of four): row-major, transposed (contiguous along M and along K), split
    // along K, batched; and a view at an odd offset, read element by element.
    let (a, b) = (tensor(&[1540, 36], 41), tensor(&[36, 1292], 42));
    check("wide, vector loads", &device, &[a, b], product);
    let (a, b) = (tensor(&[36, 1540], 43), tensor(&[1292, 36], 44));
    check(
        "wide, vector loads of transposed operands",
        &device,
        &[a, b],
        transposed,
    );
    // (scaled so the 1024-term sums stay within the comparison's absolute tolerance)
    let scaled = |dims: &[usize], seed| tensor(dims, seed).mul_scalar(0.1).unwrap();
    // (81 wide tiles over K = 1024: three splits of 352)
    let (a, b) = (scaled(&[1028, 1024], 45), scaled(&[1032, 1024], 46));
    check("wide, vector loads, split along K", &device, &[a, b], |t| {
        t[0].matmul(&t[1].transpose(0, 1).unwrap()).unwrap()
    });
    let (a, b) = (tensor(&[2, 772, 40], 47), tensor(&[2, 40, 1028], 48));
    check(
        "wide batched, vector loads",
        &device,
        &[a.clone(), b.clone()],
        product,
    );
    check("wide batched, odd offset", &device, &[a, b], |t| {
        t[0].narrow(-1, 1, 36)
            .unwrap()
            .matmul(&t[1].narrow(1, 3, 36).unwrap())
            .unwrap()
    });
    // `linear`: the bias added in the epilogue of the 64x64 kernel, of the wide kernel, and
    // in the sum of split-K partial products (input, weight and bias dims, seed)
    let linear_cases: [(&str, [&[usize]; 3], u64); 3] = [
        ("linear", [&[3, 40, 24], &[30, 24], &[30]], 51),
        ("linear, wide", [&[2049, 9], &[1030, 9], &[1030]], 54),
        ("linear, split along K", [&[8, 3000], &[9, 3000], &[9]], 57),
    ];
    for (what, dims, seed) in linear_cases {
        let inputs = [0, 1, 2].map(|i| tensor(dims[i], seed + i as u64));
        check(what, &device, &inputs, |t| {
            t[0].linear(&t[1], Some(&t[2])).unwrap()
        });
    }
    // a bias that is a strided view (every third value from the second)
    check(
        "linear, strided bias",
        &device,
        &[
            tensor(&[5, 12], 60),
            tensor(&[7, 12], 61),
            tensor(&[21], 62),
        ],
        |t| {
            let bias = t[2].reshape(&[7, 3]).unwrap().narrow(1, 1, 1).unwrap();
            t[0].linear(&t[1], Some(&bias.reshape(&[7]).unwrap()))
                .unwrap()
        },
    );
    // few output tiles and a long K: split along K, the partial products added up
    check(
        "split-K",
        &device,
        &[tensor(&[8, 3000], 29), tensor(&[3000, 9], 30)],
        product,
    );
    check(
        "split-K batched",
        &device,
        &[tensor(&[3, 5, 1100], 31), tensor(&[3, 1100, 70], 32)],
        product,
    );
    check(
        "split-K transposed",
        &device,
        // positive terms: 2,000-term sums of mixed signs cancel below the f32 tolerance
        &[
            tensor(&[2000, 30], 33).abs().unwrap(),
            tensor(&[6, 2000], 34).abs().unwrap(),
        ],
        transposed,
    );
}

/// An in-place update from a view of its own destination (`x.copy_(&x.t())`, a row added
/// to every row) reads the values from before the update on both devices, as if the source
/// were copied first: on the GPU the kernel once read and wrote one buffer in one dispatch.
#[test]
fn in_place_updates_from_a_view_of_the_destination_read_the_old_values() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let old: Vec<f32> = (0..9).map(|k| k as f32 * 1.5 - 4.0).collect();
    let transposed: Vec<f32> = (0..9).map(|k| old[(k % 3) * 3 + k / 3]).collect();
    let row_added: Vec<f32> = (0..9).map(|k| old[k] + 2.0 * old[k % 3]).collect();
    for place in [Device::Cpu, device] {
        let x = DynTensor::from_vec(old.clone(), &[3, 3])
            .unwrap()
            .to(&place)
            .unwrap();
        x.copy_(&x.transpose(0, 1).unwrap()).unwrap();
        assert_eq!(
            x.to_vec::<f32>().unwrap(),
            transposed,
            "copy_ of a transpose on {place}"
        );

        let x = DynTensor::from_vec(old.clone(), &[3, 3])
            .unwrap()
            .to(&place)
            .unwrap();
        x.add_scaled_(2.0, &x.narrow(0, 0, 1).unwrap()).unwrap();
        assert_eq!(
            x.to_vec::<f32>().unwrap(),
            row_added,
            "a row added on {place}"
        );

        let codes: Vec<i64> = (0..9).collect();
        let x = DynTensor::from_vec(codes, &[3, 3])
            .unwrap()
            .to(&place)
            .unwrap();
        x.copy_(&x.transpose(0, 1).unwrap()).unwrap();
        let want: Vec<i64> = (0..9).map(|k| (k % 3) * 3 + k / 3).collect();
        assert_eq!(x.to_vec::<i64>().unwrap(), want, "i64 copy_ on {place}");
    }
}

#[test]
fn indexing_and_joining_match_the_cpu() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let x = tensor(&[4, 6], 18);
    let rows = DynTensor::from_vec(vec![3i64, 0, 3, 1], &[4]).unwrap();
    let picks = DynTensor::from_vec(vec![5i64, 0, 2, 2, 1, 4, 0, 3], &[4, 2]).unwrap();
    check("index_select", &device, &[x.clone(), rows.clone()], |t| {
        t[0].index_select(0, &t[1]).unwrap()
    });
    check(
        "index_add (repeats add up)",
        &device,
        &[x.clone(), rows.clone(), tensor(&[4, 6], 19)],
        |t| t[0].index_add(0, &t[1], &t[2]).unwrap(),
    );
    check("gather", &device, &[x.clone(), picks.clone()], |t| {
        t[0].gather(1, &t[1]).unwrap()
    });
    check(
        "scatter_add",
        &device,
        &[x.clone(), picks.clone(), tensor(&[4, 2], 20)],
        |t| t[0].scatter_add(1, &t[1], &t[2]).unwrap(),
    );
    check("cat", &device, &[x.clone(), tensor(&[4, 3], 21)], |t| {
        DynTensor::cat(&[&t[0], &t[1]], 1).unwrap()
    });
    check(
        "permute + contiguous",
        &device,
        &[tensor(&[2, 3, 4], 22)],
        |t| t[0].permute(&[2, 0, 1]).unwrap().contiguous().unwrap(),
    );
    let y = tensor(&[3, 4, 5], 25);
    check("flip", &device, std::slice::from_ref(&y), |t| {
        t[0].flip(&[0, 2]).unwrap()
    });
    check("roll", &device, std::slice::from_ref(&y), |t| {
        t[0].roll(-3, 1).unwrap()
    });
    check("repeat", &device, std::slice::from_ref(&x), |t| {
        t[0].repeat(&[2, 1, 3]).unwrap()
    });
    check("triu", &device, std::slice::from_ref(&y), |t| {
        t[0].triu(1).unwrap()
    });
    check("tril", &device, std::slice::from_ref(&y), |t| {
        t[0].tril(-1).unwrap()
    });
    check("maximum", &device, &[y.clone(), tensor(&[4, 5], 26)], |t| {
        t[0].maximum(&t[1]).unwrap()
    });
    check("cumsum", &device, std::slice::from_ref(&y), |t| {
        t[0].cumsum(1).unwrap()
    });
    check("minimum", &device, &[y.clone(), tensor(&[5], 27)], |t| {
        t[0].minimum(&t[1]).unwrap()
    });
    // heads merged back ([B, H, T, d] read as [B, T, H, d]): the copy in runs of four
    // along the contiguous innermost axis, and the same with an innermost axis of 6
    for (d, seed) in [(8, 23), (6, 24)] {
        check(
            &format!("merge heads, d = {d}"),
            &device,
            &[tensor(&[2, 3, 5, d], seed)],
            |t| t[0].transpose(1, 2).unwrap().contiguous().unwrap(),
        );
    }
}

/// A small network's loss and every parameter gradient, on one device.
fn loss_and_grads(device: &Device) -> (f32, Vec<DynTensor>) {
    let on = |t: DynTensor| t.to(device).unwrap().requires_grad_().unwrap();
    let w1 = on(tensor(&[10, 16], 30).mul_scalar(0.3).unwrap());
    let b1 = on(tensor(&[16], 31));
    let w2 = on(tensor(&[16, 4], 32).mul_scalar(0.3).unwrap());
    let x = tensor(&[8, 10], 33).to(device).unwrap();
    let labels = DynTensor::from_vec(vec![0i64, 1, 2, 3, 3, 2, 1, 0], &[8]).unwrap();
    let h = x.matmul(&w1).unwrap().add(&b1).unwrap().gelu().unwrap();
    let logits = h.matmul(&w2).unwrap().layer_norm_free();
    let loss = cross_entropy(&logits, &labels, &CrossEntropyOptions::default()).unwrap();
    let grads = loss.backward().unwrap();
    let value = loss.item::<f32>().unwrap();
    (
        value,
        [&w1, &b1, &w2]
            .iter()
            .map(|p| grads.grad(p).unwrap().clone())
            .collect(),
    )
}

/// A normalisation written with reductions, so their backward runs too.
trait NormaliseRows {
    fn layer_norm_free(&self) -> DynTensor;
}

impl NormaliseRows for DynTensor {
    fn layer_norm_free(&self) -> DynTensor {
        let centred = self.sub(&self.mean(&[-1], true).unwrap()).unwrap();
        let scale = centred
            .mul(&centred)
            .unwrap()
            .mean(&[-1], true)
            .unwrap()
            .add_scalar(1e-5)
            .unwrap();
        centred.mul(&scale.rsqrt().unwrap()).unwrap()
    }
}

#[test]
fn gradients_on_the_gpu_match_the_cpu() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let (cpu_loss, cpu_grads) = loss_and_grads(&Device::Cpu);
    let (gpu_loss, gpu_grads) = loss_and_grads(&device);
    assert!((cpu_loss - gpu_loss).abs() <= 1e-5 + 1e-4 * cpu_loss.abs());
    for (i, (c, g)) in cpu_grads.iter().zip(&gpu_grads).enumerate() {
        assert_close(&format!("gradient {i}"), c, g);
    }
}

#[test]
fn gradients_flow_back_through_a_device_copy() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let x = tensor(&[3, 4], 40).requires_grad_().unwrap();
    let loss = x.to(&device).unwrap().tanh().unwrap().sum_all().unwrap();
    let grads = loss.backward().unwrap();
    let dx = grads.grad(&x).unwrap();
    assert_eq!(dx.device(), Device::Cpu);
    let expected = x
        .tanh()
        .unwrap()
        .mul(&x.tanh().unwrap())
        .unwrap()
        .rsub_scalar(1.0)
        .unwrap();
    let (a, b) = (
        dx.to_vec::<f32>().unwrap(),
        expected.to_vec::<f32>().unwrap(),
    );
    for (a, b) in a.iter().zip(&b) {
        assert!((a - b).abs() < 1e-5, "{a} vs {b}");
    }
}

/// Five Adam steps of a two-layer MLP on one device; the final weights.
fn train_mlp(device: &Device) -> Vec<Vec<f32>> {
    rumus::manual_seed(7);
    let mut mlp = TinyMlp::new(device);
    for _ in 0..5 {
        mlp.step();
    }
    mlp.parameters()
        .iter()
        .map(|p| p.to_vec::<f32>().unwrap())
        .collect()
}

#[test]
fn adam_training_matches_the_cpu_and_stays_on_the_device() {
    let Some(device) = gpu() else { return };
    let _serial = serial();
    let cpu = train_mlp(&Device::Cpu);
    let before = transfer_counts();
    let gpu = train_mlp(&device);
    let after = transfer_counts();
    assert_eq!(
        after.fallback, before.fallback,
        "a training step read GPU tensors back for a host-only path"
    );
    for (c, g) in cpu.iter().zip(&gpu) {
        for (x, y) in c.iter().zip(g) {
            assert!((x - y).abs() <= 1e-4 + 1e-3 * x.abs(), "cpu {x}, gpu {y}");
        }
    }
}

#[test]
fn convolution_and_pooling_run_on_the_device() {
    let Some(device) = gpu() else { return };
    let x = tensor(&[2, 3, 8, 8], 60);
    let w = tensor(&[4, 3, 3, 3], 61);
    let _serial = serial();
    let before = transfer_counts();
    check("conv2d", &device, &[x.clone(), w.clone()], |t| {
        t[0].conv2d(&t[1], None, (2, 1), (1, 1), (1, 2), 1).unwrap()
    });
    check("max_pool2d", &device, std::slice::from_ref(&x), |t| {
        t[0].max_pool2d((3, 2), (2, 2), (1, 1)).unwrap()
    });
    check("avg_pool2d", &device, std::slice::from_ref(&x), |t| {
        t[0].avg_pool2d((3, 3), (2, 1), (1, 0), true).unwrap()
    });
    // gradients through unfold/fold and the pooling pair
    let grads_on = |device: &Device| {
        let x = x.to(device).unwrap().requires_grad_().unwrap();
        let w = w.to(device).unwrap().requires_grad_().unwrap();
        let y = x.conv2d(&w, None, (1, 1), (1, 1), (1, 1), 1).unwrap();
        let pooled = y.max_pool2d((2, 2), (2, 2), (0, 0)).unwrap();
        let averaged = y.avg_pool2d((2, 2), (1, 1), (1, 1), false).unwrap();
        let loss = pooled
            .sum_all()
            .unwrap()
            .add(&averaged.mul(&averaged).unwrap().sum_all().unwrap())
            .unwrap();
        let grads = loss.backward().unwrap();
        [
            grads.grad(&x).unwrap().clone(),
            grads.grad(&w).unwrap().clone(),
        ]
    };
    let (cpu, on_gpu) = (grads_on(&Device::Cpu), grads_on(&device));
    assert_close("conv input gradient", &cpu[0], &on_gpu[0]);
    assert_close("conv weight gradient", &cpu[1], &on_gpu[1]);
    assert_eq!(transfer_counts().fallback, before.fallback);
}

/// Ops whose kernel loops grow with one dimension: a pooling window of 300 x 300 taps (each
/// output element's invocation loops over all of them) and the maximum of a row of 17
/// million elements (each of 256 invocations loops over 66,407 of them). Right on a GPU, and
/// an error naming the limit on lavapipe, which would end the loops early and return a
/// wrong number.
#[test]
fn loops_past_a_device_loop_limit_are_errors_not_wrong_numbers() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    type Op = fn(&DynTensor) -> rumus::Result<DynTensor>;
    let ops: [(&str, Vec<usize>, Op, &str); 3] = [
        (
            "max_pool2d",
            vec![1, 2, 300, 300],
            |t| t.max_pool2d((300, 300), (300, 300), (0, 0)),
            "90910 loop iterations",
        ),
        (
            "avg_pool2d",
            vec![1, 2, 300, 300],
            |t| t.avg_pool2d((300, 300), (300, 300), (0, 0), true),
            "90910 loop iterations",
        ),
        (
            "reduction",
            vec![1, 17_000_000],
            |t| t.max(&[1], false),
            "66535 loop iterations",
        ),
    ];
    for (name, dims, op, iterations) in ops {
        let x = tensor(&dims, 62);
        let on_gpu = op(&x.to(&device).unwrap());
        if common::gpu::ends_long_loops(&device) {
            let error = on_gpu.unwrap_err().to_string();
            assert!(error.starts_with(name), "{error}");
            assert!(error.contains(iterations), "{error}");
        } else {
            assert_close(name, &op(&x).unwrap(), &on_gpu.unwrap());
        }
    }
}

/// A GPU ended mid-run (`GpuDevice::destroy`, which records the fault as a driver's loss
/// report would) makes every later op, readback, wait and upload on it an error that says
/// so, not a panic inside wgpu, and what was copied to the CPU before stays usable. This
/// binary's ignored `lost_device`, run alone in a child process: it ends the process's GPU.
/// (A loss the driver reports first reaches rumus through wgpu's lost callback and a panic
/// inside `poll` that rumus catches without printing it, `fault::catch_quietly`, tested on
/// its own; no test here can make a driver lose its device.)
#[test]
fn a_lost_gpu_is_an_error_not_a_panic() {
    if gpu().is_none() {
        return;
    }
    let this_binary = std::env::current_exe().unwrap();
    let run = std::process::Command::new(this_binary)
        .args(["--ignored", "--exact", "lost_device", "--nocapture"])
        .env(LOSE_THE_GPU, "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Set by `a_lost_gpu_is_an_error_not_a_panic` for its child: `lost_device` ends the GPU
/// only then, not in a run of every ignored test.
const LOSE_THE_GPU: &str = "RUMUS_TEST_LOSE_THE_GPU";

#[test]
#[ignore = "run by a_lost_gpu_is_an_error_not_a_panic, in a process of its own"]
fn lost_device() {
    if std::env::var_os(LOSE_THE_GPU).is_none() {
        eprintln!("skipped: ends the process's GPU; a_lost_gpu_is_an_error_not_a_panic runs it");
        return;
    }
    let Some((device, gpu_device)) = common::gpu::gpu_and_handle() else {
        return;
    };
    let x = tensor(&[3, 4], 70).to(&device).unwrap();
    let doubled = x.add(&x).unwrap();
    let saved = doubled.to(&Device::Cpu).unwrap();
    let pending = x.mul(&x).unwrap();
    // A model with an optimizer's state on the GPU, and a batch's logits, for the paths that
    // snapshot or summarize GPU tensors (saving a model, a checkpoint, a batch's metrics).
    let mut model = Linear::<4, 3>::new().unwrap();
    model.to_device(device.clone()).unwrap();
    let mut adam = Adam::new(model.parameters(), AdamConfig::adam()).unwrap();
    let labels = DynTensor::from_vec(vec![0i64, 2, 1], &[3]).unwrap();
    let loss = cross_entropy(
        &model.forward_dyn(&x).unwrap(),
        &labels.to(&device).unwrap(),
        &CrossEntropyOptions::default(),
    )
    .unwrap();
    adam.step(&mut loss.backward().unwrap()).unwrap();
    let logits = model.forward_dyn(&x).unwrap();
    gpu_device.destroy();
    let lost = |what: &str, error: rumus::Error| {
        let message = error.to_string();
        assert!(
            message.contains("the GPU reported a fault") && message.contains("destroyed"),
            "{what}: {message}"
        );
    };
    lost("op", x.mul(&x).unwrap_err());
    lost("readback", pending.to(&Device::Cpu).unwrap_err());
    let shown = format!("{pending:?}");
    assert!(
        shown.contains("<unreadable: the GPU reported a fault"),
        "{shown}"
    );
    // Host code reading GPU tensors (saving them) gets the fault as its error.
    let file =
        std::env::temp_dir().join(format!("rumus-lost-gpu-{}.safetensors", std::process::id()));
    let state = vec![("x".to_string(), x.clone())];
    lost("saving", rumus::io::write_state(&state, &file).unwrap_err());
    assert!(!file.exists(), "nothing written");
    lost("a model's state", model.state_dict().unwrap_err());
    lost("an optimizer's state", adam.state_dict().unwrap_err());
    lost(
        "saving a model",
        rumus::io::save_safetensors(&model, &file).unwrap_err(),
    );
    assert!(!file.exists(), "no model written");
    lost(
        "a checkpoint",
        Checkpoint::capture(&model, &adam, None, 0, 1).unwrap_err(),
    );
    lost(
        "a batch's metrics",
        rumus::train::classification(&logits, &labels).unwrap_err(),
    );
    lost("synchronize", gpu_device.synchronize().unwrap_err());
    lost("upload", tensor(&[2], 71).to(&device).unwrap_err());
    let again = Device::gpu().unwrap();
    lost(
        "the device again",
        DynTensor::zeros_on(&[2], DType::F32, &again).unwrap_err(),
    );
    let expected = tensor(&[3, 4], 70).mul_scalar(2.0).unwrap().to_f64_vec();
    assert_eq!(saved.to_f64_vec(), expected, "saved before the loss");
}

/// The longest K the wide product kernel walks in one job on lavapipe, whose loops end after
/// 65,535 iterations: the host takes it to loop under 4 times per element of K (measured),
/// so `[2048, 16383] @ [16383, 2048]` (256 wide tiles, enough not to split K for speed)
/// runs unsplit there. Positive operands, so a walk ended early would come out visibly short.
#[test]
fn wide_products_as_long_as_the_loop_budget_allows_are_right() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let k = 16_383;
    let a = tensor(&[2048, k], 73).abs().unwrap();
    let b = tensor(&[k, 2048], 74).abs().unwrap();
    check("[2048, 16383] @ [16383, 2048]", &device, &[a, b], |t| {
        t[0].matmul(&t[1]).unwrap()
    });
}

#[test]
fn tensors_beyond_one_grid_dimension_work() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    // 65,536 x 257 elements: the row sums need more than 65,535 workgroups (one a row); the
    // element-wise kernels (four elements a thread) fit one grid dimension up to 67 million
    let n = 65_536 * 257;
    let x = DynTensor::from_vec(
        (0..n).map(|i| (i % 7) as f32).collect::<Vec<_>>(),
        &[65_536, 257],
    )
    .unwrap();
    let on_gpu = x.to(&device).unwrap();
    let y = on_gpu.mul_scalar(2.0).unwrap().add_scalar(1.0).unwrap();
    let back = y.to_vec::<f32>().unwrap();
    for i in [0, 1, 65_535 * 256, n - 1] {
        assert_eq!(back[i], (i % 7) as f32 * 2.0 + 1.0, "element {i}");
    }
    let sums = y.sum(&[1], false).unwrap().to_vec::<f32>().unwrap();
    let expected = x
        .mul_scalar(2.0)
        .unwrap()
        .add_scalar(1.0)
        .unwrap()
        .sum(&[1], false)
        .unwrap();
    assert_eq!(sums, expected.to_vec::<f32>().unwrap());
}

#[test]
fn device_mistakes_are_errors() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let a = tensor(&[2, 2], 70).to(&device).unwrap();
    let b = tensor(&[2, 2], 71);
    let mixed = a.add(&b).unwrap_err().to_string();
    assert!(mixed.contains("different devices"), "{mixed}");
    let f64_tensor = DynTensor::from_vec(vec![0.1f64, 1e300], &[2]).unwrap();
    let big = DynTensor::from_vec(vec![1i64 << 40], &[1]).unwrap();
    if device.is_cuda() {
        // CUDA keeps every dtype at its own width.
        let back = f64_tensor.to(&device).unwrap().to_vec::<f64>().unwrap();
        assert_eq!(back, [0.1, 1e300]);
        let back = big.to(&device).unwrap().to_vec::<i64>().unwrap();
        assert_eq!(back, [1i64 << 40]);
    } else {
        // wgpu has no f64, and keeps i64 in 32 bits.
        let refused = f64_tensor.to(&device).unwrap_err().to_string();
        assert!(refused.contains("f64"), "{refused}");
        assert!(big.to(&device).is_err());
    }
}

#[test]
fn dropout_on_the_gpu_drops_at_its_rate_and_repeats_with_a_seed() {
    let Some(device) = gpu() else { return };
    let _serial = serial();
    let x = DynTensor::ones(&[400, 250], DType::F32)
        .unwrap()
        .to(&device)
        .unwrap();
    let draw = |seed| {
        rumus::manual_seed(seed);
        rumus::nn::functional::dropout(&x, 0.3, true)
            .unwrap()
            .to_vec::<f32>()
            .unwrap()
    };
    let (first, again, other) = (draw(5), draw(5), draw(6));
    assert_eq!(first, again, "the same seed gives the same mask");
    rumus::manual_seed(5);
    let on_host = rumus::nn::functional::dropout(&x.to(&Device::Cpu).unwrap(), 0.3, true)
        .unwrap()
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(
        first, on_host,
        "a seed gives the same mask on the CPU and the GPU"
    );
    assert_ne!(first, other, "another seed gives another mask");
    let kept_value = 1.0 / 0.7f32;
    assert!(first.iter().all(|&v| v == 0.0 || v == kept_value));
    let dropped = first.iter().filter(|&&v| v == 0.0).count() as f64 / first.len() as f64;
    // 100,000 draws: the standard deviation of the rate is 0.0014
    assert!((dropped - 0.3).abs() < 0.01, "dropped {dropped}");
    // The gradient draws the same mask again (none is kept): for an input of ones it equals
    // the output, also when the input is a strided view.
    let ones = DynTensor::ones(&[250, 400], DType::F32)
        .unwrap()
        .to(&device)
        .unwrap();
    let leaf = ones.requires_grad_().unwrap();
    let out = rumus::nn::functional::dropout(&leaf.transpose(0, 1).unwrap(), 0.3, true).unwrap();
    let grads = out.sum_all().unwrap().backward().unwrap();
    let grad = grads.get(&leaf).unwrap().transpose(0, 1).unwrap();
    assert_eq!(grad.to_vec::<f32>().unwrap(), out.to_vec::<f32>().unwrap());
}

#[test]
fn a_transformer_block_and_a_cnn_match_the_cpu() {
    use rumus::nn::{Conv2d, TransformerEncoderBlock};
    let Some(device) = gpu() else { return };
    let _serial = serial();
    let build = |device: &Device| {
        rumus::manual_seed(11);
        let _on = device.set_default();
        let block = TransformerEncoderBlock::<16, 4, 32>::new().unwrap();
        block.eval();
        let conv = Conv2d::<2, 3, 3>::new().unwrap();
        (block, conv)
    };
    let run = |device: &Device| {
        let (block, conv) = build(device);
        let x = tensor(&[2, 5, 16], 80)
            .to(device)
            .unwrap()
            .requires_grad_()
            .unwrap();
        let images = tensor(&[2, 2, 6, 6], 81).to(device).unwrap();
        let y = block.forward_dyn(&x, None, true).unwrap();
        let z = conv.forward_dyn(&images).unwrap();
        let loss = y
            .tanh()
            .unwrap()
            .sum_all()
            .unwrap()
            .add(&z.sum_all().unwrap())
            .unwrap();
        let grads = loss.backward().unwrap();
        let mut out = vec![y, z, grads.grad(&x).unwrap().clone()];
        out.extend(
            block
                .parameters()
                .iter()
                .map(|p| grads.grad(p).unwrap().clone()),
        );
        out
    };
    let (cpu, on_gpu) = (run(&Device::Cpu), run(&device));
    for (i, (c, g)) in cpu.iter().zip(&on_gpu).enumerate() {
        assert_close(&format!("output or gradient {i}"), c, g);
    }
}

#[test]
fn a_model_moves_between_devices_in_place() {
    let Some(device) = gpu() else { return };
    let _serial = serial();
    rumus::manual_seed(3);
    let mut layer = Linear::<6, 4>::new().unwrap();
    let handles = layer.parameters();
    let values: Vec<Vec<f32>> = handles.iter().map(|p| p.to_vec().unwrap()).collect();
    layer.to_device(device.clone()).unwrap();
    for (handle, value) in handles.iter().zip(&values) {
        // the handles taken before the move (an optimizer's) see the moved tensor
        assert_eq!(handle.device(), device);
        assert_eq!(&handle.to_vec::<f32>().unwrap(), value);
    }
    let x = tensor(&[3, 6], 90);
    let on_gpu = layer.forward_dyn(&x.to(&device).unwrap()).unwrap();
    layer.to_device(Device::Cpu).unwrap();
    assert!(handles.iter().all(|p| p.device() == Device::Cpu));
    assert_close(
        "forward after the move",
        &layer.forward_dyn(&x).unwrap(),
        &on_gpu,
    );
}

#[test]
fn tensors_past_128_mib_work_where_the_adapter_allows_them() {
    let _serial = serial();
    let Some((device, gpu)) = common::gpu::gpu_and_handle() else {
        return;
    };
    // 136 MB: past wgpu's default binding limit of 128 MiB, which rumus lifts to the
    // adapter's own (lavapipe's is 128 MiB; discrete GPUs allow gigabytes)
    let n = 34 << 20;
    let x = DynTensor::ones(&[n], DType::F32).unwrap();
    let bytes = n as u64 * 4;
    if gpu.max_binding_bytes() >= bytes {
        // (a sum of 34M halves is not exact in f32: check the extremes and the last element)
        let y = x.to(&device).unwrap().mul_scalar(0.5).unwrap();
        let last = y.narrow(0, n - 1, 1).unwrap().sum_all().unwrap();
        assert_eq!(last.item::<f32>().unwrap(), 0.5);
        assert_eq!(y.min(&[0], false).unwrap().item::<f32>().unwrap(), 0.5);
        assert_eq!(y.max(&[0], false).unwrap().item::<f32>().unwrap(), 0.5);
    } else {
        let message = x.to(&device).unwrap_err().to_string();
        assert!(message.contains("at most"), "{message}");
    }
}

#[test]
fn convolutions_whose_columns_pass_the_binding_limit_run_in_batch_slices() {
    let _serial = serial();
    let Some((device, gpu)) = common::gpu::gpu_and_handle() else {
        return;
    };
    // [1000, 32, 13, 13] with a 3x3 kernel: 139 MB of im2col columns, past lavapipe's
    // 128 MiB binding limit (the slicing only starts where the adapter needs it)
    let x = tensor(&[1000, 32, 13, 13], 95).mul_scalar(0.1).unwrap();
    let w = tensor(&[4, 32, 3, 3], 96).mul_scalar(0.1).unwrap();
    let columns_bytes = 1000 * 32 * 9 * 121 * 4u64;
    eprintln!(
        "columns {columns_bytes} bytes, binding limit {}",
        gpu.max_binding_bytes()
    );
    check("large conv2d", &device, &[x, w], |t| {
        t[0].conv2d(&t[1], None, (1, 1), (0, 0), (1, 1), 1).unwrap()
    });
}

#[test]
fn gpu_tensors_cross_threads() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let a = tensor(&[64, 64], 97)
        .to(&device)
        .unwrap()
        .requires_grad_()
        .unwrap();
    let b = tensor(&[64, 64], 98).to(&device).unwrap();
    // the forward on another thread, the backward here, and both threads queueing kernels
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let (a, b) = (a.clone(), b.clone());
            std::thread::spawn(move || a.matmul(&b).unwrap().tanh().unwrap().sum_all().unwrap())
        })
        .collect();
    let losses: Vec<DynTensor> = workers.into_iter().map(|w| w.join().unwrap()).collect();
    let expected = a.matmul(&b).unwrap().tanh().unwrap().sum_all().unwrap();
    for loss in &losses {
        assert_close(
            "loss from another thread",
            &expected.detach().to(&Device::Cpu).unwrap(),
            &loss.detach(),
        );
        let grads = loss.backward().unwrap();
        assert_eq!(grads.grad(&a).unwrap().device(), device);
    }
}

#[test]
fn reading_a_view_back_returns_just_its_elements() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let x = tensor(&[6, 5], 99);
    let on_gpu = x.to(&device).unwrap();
    type View = fn(&DynTensor) -> DynTensor;
    let views: [(&str, View); 4] = [
        ("rows 3..5", |t: &DynTensor| t.narrow(0, 3, 2).unwrap()),
        ("columns 1..4", |t: &DynTensor| t.narrow(1, 1, 3).unwrap()),
        ("transposed", |t: &DynTensor| t.transpose(0, 1).unwrap()),
        ("one element", |t: &DynTensor| {
            t.narrow(0, 5, 1).unwrap().narrow(1, 4, 1).unwrap()
        }),
    ];
    for (name, view) in views {
        assert_eq!(
            view(&on_gpu).to_vec::<f32>().unwrap(),
            view(&x).to_vec::<f32>().unwrap(),
            "{name}"
        );
    }
}

#[test]
fn uploaded_labels_are_checked_without_waiting_for_the_gpu() {
    let Some(device) = gpu() else { return };
    let _serial = serial();
    let labels: Vec<i64> = (0..12).map(|i| (i * 7) % 5).collect();
    let targets = DynTensor::from_vec(labels.clone(), &[12])
        .unwrap()
        .to(&device)
        .unwrap();
    let logits = tensor(&[12, 5], 70);
    let expected = cross_entropy(
        &logits,
        &DynTensor::from_vec(labels.clone(), &[12]).unwrap(),
        &CrossEntropyOptions::default(),
    )
    .unwrap()
    .item::<f32>()
    .unwrap();
    let before = transfer_counts();
    let loss = cross_entropy(
        &logits.to(&device).unwrap(),
        &targets,
        &CrossEntropyOptions::default(),
    )
    .unwrap();
    // A view of the labels reads the right elements, still without a transfer.
    let view = targets.narrow(0, 3, 6).unwrap().to_vec::<i64>().unwrap();
    let after = transfer_counts();
    assert_eq!(
        after.downloads, before.downloads,
        "the labels were read back"
    );
    assert_eq!(view, labels[3..9]);
    assert!((loss.item::<f32>().unwrap() - expected).abs() <= 1e-5 * expected.abs());
    // A label out of range is still an error naming it.
    let bad = DynTensor::from_vec(vec![0i64, 5], &[2])
        .unwrap()
        .to(&device)
        .unwrap();
    let logits = tensor(&[2, 5], 71).to(&device).unwrap();
    let error = cross_entropy(&logits, &bad, &CrossEntropyOptions::default()).unwrap_err();
    assert!(error.to_string().contains("target 5"), "{error}");
}

#[test]
fn activation_gradients_take_their_limits_at_huge_inputs() {
    let _serial = serial();
    // d/dx of GELU (both forms) and SiLU tends to 1 as x -> +inf and to 0 as x -> -inf; at
    // 1e20 and beyond the cubic inside the tanh form overflows f32.
    let inputs = [1e20f32, 1e30, -1e20, -1e30];
    let limits = [1.0f32, 1.0, 0.0, 0.0];
    let mut devices = vec![Device::Cpu];
    devices.extend(gpu());
    for device in &devices {
        for (name, f) in [
            (
                "gelu",
                DynTensor::gelu as fn(&DynTensor) -> rumus::Result<DynTensor>,
            ),
            ("gelu_tanh", DynTensor::gelu_tanh),
            ("silu", DynTensor::silu),
        ] {
            let x = DynTensor::from_vec(inputs.to_vec(), &[4])
                .unwrap()
                .to(device)
                .unwrap()
                .requires_grad_()
                .unwrap();
            let grads = f(&x).unwrap().sum_all().unwrap().backward().unwrap();
            let got = grads.grad(&x).unwrap().to_vec::<f32>().unwrap();
            for ((g, want), x) in got.iter().zip(limits).zip(inputs) {
                assert!((g - want).abs() < 1e-6, "{name}'({x}) on {device}: {g}");
            }
        }
    }
}

/// An empty tensor whose other dims multiply past `usize` ([0, 2^40, 2^40]) goes through the
/// GPU's ops as through the CPU's: empty results of the same shapes, no kernel arithmetic on
/// its sizes (which panicked on overflow before).
#[test]
fn empty_tensors_with_huge_dims_work_as_on_the_cpu() {
    let _serial = serial();
    let Some(device) = gpu() else { return };
    let big = 1usize << 40;
    let on_cpu = DynTensor::zeros(&[0, big, big], DType::F32).unwrap();
    let on_gpu = on_cpu.to(&device).unwrap();
    type Op = fn(&DynTensor) -> rumus::Result<DynTensor>;
    let ops: [(&str, Op); 10] = [
        ("sum", |t| t.sum(&[1, 2], false)),
        ("max", |t| t.max(&[1, 2], false)),
        ("exp of a transpose", |t| t.transpose(0, 2)?.exp()),
        ("contiguous transpose", |t| t.transpose(0, 2)?.contiguous()),
        ("cat", |t| DynTensor::cat(&[t, t], 0)),
        ("cat along a huge axis", |t| DynTensor::cat(&[t, t], 1)),
        ("cat of transposes", |t| {
            let last_empty = t.transpose(0, 2)?;
            DynTensor::cat(&[&last_empty, &last_empty], 0)
        }),
        ("copy into a transpose", |t| {
            let target = t.zeros_like()?.transpose(0, 2)?;
            target.copy_(&t.transpose(0, 2)?)?;
            Ok(target)
        }),
        ("softmax", |t| t.softmax(2)),
        ("batched matmul", |t| {
            let big = 1usize << 40;
            t.reshape(&[big, big, 0, 1])?
                .matmul(&t.reshape(&[big, 1, 1, 0])?)
        }),
    ];
    for (name, op) in ops {
        let expected = op(&on_cpu).unwrap();
        let result = op(&on_gpu).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(result.device().is_gpu(), "{name}");
        assert_eq!(result.dims(), expected.dims(), "{name}");
        assert_eq!(result.numel(), 0, "{name}");
    }
    // Results past any GPU buffer are errors, however their sizes multiply.
    let long = DynTensor::zeros(&[0, 1 << 62], DType::F32)
        .unwrap()
        .to(&device)
        .unwrap();
    assert!(long.sum(&[0], false).is_err(), "2^62 sums of nothing");
    let view = tensor(&[1], 72)
        .to(&device)
        .unwrap()
        .broadcast_to(&[1 << 62])
        .unwrap();
    assert!(DynTensor::cat(&[&view, &view], 0).is_err());
    let rows = DynTensor::zeros(&[1 << 62, 1, 0], DType::F32)
        .unwrap()
        .to(&device)
        .unwrap();
    let cols = DynTensor::zeros(&[1, 0, 1], DType::F32)
        .unwrap()
        .to(&device)
        .unwrap();
    assert!(rows.matmul(&cols).is_err(), "a [2^62, 1, 1] product");
    // An empty product is still refused for operands no product takes, as a full one is.
    let ints = |dims: &[usize]| {
        DynTensor::zeros(dims, DType::I64)
            .unwrap()
            .to(&device)
            .unwrap()
    };
    assert!(ints(&[0, 2]).matmul(&ints(&[2, 3])).is_err());
}

/// On CUDA, which keeps f64 at its width (wgpu has none): f64 element-wise ops, reductions,
/// softmax, products (cuBLASLt's f64), layer norm and gathers against the CPU's f64 kernels,
/// to f64 rounding.
#[test]
fn f64_ops_match_the_cpu_where_the_device_keeps_f64() {
    let Some(device) = gpu() else { return };
    if !device.is_cuda() {
        common::gpu::skip(
            "RUMUS_REQUIRE_CUDA",
            "f64 kernels",
            format!("{device} has none"),
        );
        return;
    }
    let wide = |t: DynTensor| t.to_dtype(DType::F64).unwrap();
    let (a, b) = (wide(tensor(&[7, 33], 90)), wide(tensor(&[33, 5], 91)));
    let weight = wide(tensor(&[33], 92));
    let index =
        DynTensor::from_vec((0..7).map(|i| (i * 5) % 33).collect::<Vec<i64>>(), &[7, 1]).unwrap();
    let ops = |t: &[DynTensor]| -> Vec<DynTensor> {
        let (a, b, w, i) = (&t[0], &t[1], &t[2], &t[3]);
        vec![
            a.exp().unwrap().add(&a.sigmoid().unwrap()).unwrap(),
            a.mul(w).unwrap().abs().unwrap().log1p().unwrap(),
            a.sum(&[0], false).unwrap(),
            a.max(&[1], true).unwrap(),
            a.softmax(1).unwrap(),
            a.matmul(b).unwrap(),
            rumus::nn::functional::layer_norm(a, Some(w), None, 1e-5).unwrap(),
            a.gather(1, i).unwrap(),
        ]
    };
    let on_cpu = ops(&[a.clone(), b.clone(), weight.clone(), index.clone()]);
    let moved: Vec<DynTensor> = [a, b, weight, index]
        .iter()
        .map(|t| t.to(&device).unwrap())
        .collect();
    for (k, (cpu, gpu)) in on_cpu.iter().zip(ops(&moved)).enumerate() {
        assert_eq!(gpu.dtype(), DType::F64, "op {k}");
        assert!(gpu.device().is_cuda(), "op {k} left the device");
        for (x, y) in cpu.to_f64_vec().iter().zip(gpu.to_f64_vec()) {
            assert!(
                (x - y).abs() <= 1e-12 + 1e-12 * x.abs(),
                "op {k}: cpu {x}, cuda {y}"
            );
        }
    }
}
