//! Fused scaled dot-product attention: against finite differences (first and second order),
//! against the same attention spelled out with products and a softmax, with padding and
//! causal masks and dropout, and with memory that stays linear in the sequence length.

mod common;

use common::gpu::kernels_run;
use common::{check_first_and_second_order, randn};
use rumus::ops::attention::SdpaOptions;
use rumus::prelude::*;
use rumus::storage::StoragePeak;

/// The memory test reads process-wide byte counts: the tests run one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// Padding on the last two keys of sample 0 and the second key of sample 1.
fn padding(s: usize) -> DynTensor {
    let values: Vec<bool> = (0..2 * s)
        .map(|i| if i < s { i >= s - 2 } else { i == s + 1 })
        .collect();
    DynTensor::from_vec(values, &[2, s]).unwrap()
}

/// Padding on the last two keys of sample 0 and on every key of sample 1, whose queries
/// see no key at all.
fn sample_1_sees_no_key(s: usize) -> DynTensor {
    let values: Vec<bool> = (0..2 * s).map(|i| i >= s || i + 2 >= s).collect();
    DynTensor::from_vec(values, &[2, s]).unwrap()
}

/// The attention written out: `softmax(scale q k^T + masks) v` with the scores in memory.
fn spelled_out(
    q: &DynTensor,
    k: &DynTensor,
    v: &DynTensor,
    mask: Option<&DynTensor>,
    causal: bool,
) -> DynTensor {
    probabilities(q, k, mask, causal).matmul(v).unwrap()
}

/// `softmax(scale q k^T + masks)`.
fn probabilities(
    q: &DynTensor,
    k: &DynTensor,
    mask: Option<&DynTensor>,
    causal: bool,
) -> DynTensor {
    let d = q.dims()[3] as f64;
    let mut scores = q
        .matmul(&k.transpose(-1, -2).unwrap())
        .unwrap()
        .mul_scalar(1.0 / d.sqrt())
        .unwrap();
    let (t, s) = (q.dims()[2], k.dims()[2]);
    if let Some(mask) = mask {
        let mask = mask.reshape(&[2, 1, 1, s]).unwrap();
        scores = scores.masked_fill(&mask, f64::NEG_INFINITY).unwrap();
    }
    if causal {
        let above: Vec<bool> = (0..t * s).map(|i| i % s > i / s).collect();
        let above = DynTensor::from_vec(above, &[t, s]).unwrap();
        scores = scores.masked_fill(&above, f64::NEG_INFINITY).unwrap();
    }
    scores.softmax(-1).unwrap()
}

#[test]
fn gradients_match_finite_differences_to_second_order() {
    let _serial = serial();
    let mask = padding(7);
    check_first_and_second_order(
        "attention with padding",
        |x: &[DynTensor]| {
            let options = SdpaOptions {
                key_padding_mask: Some(&mask),
                ..Default::default()
            };
            x[0].scaled_dot_product_attention(&x[1], &x[2], options)
        },
        vec![
            randn(&[2, 2, 5, 3], 1),
            randn(&[2, 2, 7, 3], 2),
            randn(&[2, 2, 7, 4], 3),
        ],
    );
    // The second order runs the recorded backward pass, which forms the probabilities:
    // zeros, not softmax's NaN, for the queries that see no key.
    let unseen = sample_1_sees_no_key(7);
    check_first_and_second_order(
        "attention where sample 1 sees no key",
        |x: &[DynTensor]| {
            let options = SdpaOptions {
                key_padding_mask: Some(&unseen),
                causal: true,
                ..Default::default()
            };
            x[0].scaled_dot_product_attention(&x[1], &x[2], options)
        },
        vec![
            randn(&[2, 2, 5, 3], 14),
            randn(&[2, 2, 7, 3], 15),
            randn(&[2, 2, 7, 4], 16),
        ],
    );
    check_first_and_second_order(
        "causal attention",
        |x: &[DynTensor]| {
            let options = SdpaOptions {
                causal: true,
                scale: Some(0.7),
                ..Default::default()
            };
            x[0].scaled_dot_product_attention(&x[1], &x[2], options)
        },
        vec![
            randn(&[3, 6, 4], 4),
            randn(&[3, 6, 4], 5),
            randn(&[3, 6, 2], 6),
        ],
    );
    // Each evaluation draws the same dropout (the seed is set inside); the second order goes
    // through the recorded backward pass, which drops out the same probabilities.
    check_first_and_second_order(
        "attention with dropout",
        |x: &[DynTensor]| {
            rumus::manual_seed(17);
            let options = SdpaOptions {
                causal: true,
                dropout_p: 0.3,
                ..Default::default()
            };
            x[0].scaled_dot_product_attention(&x[1], &x[2], options)
        },
        vec![
            randn(&[2, 6, 3], 11),
            randn(&[2, 8, 3], 12),
            randn(&[2, 8, 4], 13),
        ],
    );
}

#[test]
fn the_fused_op_equals_the_spelled_out_attention() {
    let _serial = serial();
    let leaf = |dims: &[usize], seed| randn(dims, seed).requires_grad_().unwrap();
    // 150 keys: more than one block of the kernel, a ragged last one.
    let (q, k, v) = (
        leaf(&[2, 3, 70, 8], 7),
        leaf(&[2, 3, 150, 8], 8),
        leaf(&[2, 3, 150, 5], 9),
    );
    let cotangent = randn(&[2, 3, 70, 5], 10);
    let mask = padding(150);
    let cases = [
        (None, false, 0.0),
        (Some(&mask), false, 0.0),
        (Some(&mask), true, 0.0),
        (None, false, 0.25),
        (Some(&mask), true, 0.4),
    ];
    for (mask, causal, dropout_p) in cases {
        let options = SdpaOptions {
            key_padding_mask: mask,
            causal,
            scale: None,
            dropout_p,
        };
        // With dropout both forms take one seed from the generator: the same one here.
        rumus::manual_seed(23);
        let fused = q.scaled_dot_product_attention(&k, &v, options).unwrap();
        rumus::manual_seed(23);
        let reference = if dropout_p > 0.0 {
            let p = probabilities(&q, &k, mask, causal);
            rumus::nn::functional::dropout(&p, dropout_p, true)
                .unwrap()
                .matmul(&v)
                .unwrap()
        } else {
            spelled_out(&q, &k, &v, mask, causal)
        };
        let what = format!(
            "mask {}, causal {causal}, dropout {dropout_p}",
            mask.is_some()
        );
        let close = |a: &DynTensor, b: &DynTensor, name: &str| {
            for (x, y) in a.to_f64_vec().iter().zip(&b.to_f64_vec()) {
                assert!(
                    (x - y).abs() <= 1e-12 + 1e-10 * y.abs(),
                    "{what} {name}: {x} vs {y}"
                );
            }
        };
        close(&fused, &reference, "output");
        let inputs = [&q, &k, &v];
        let fused_grads =
            rumus::autograd::grad_with(&[&fused], &[&cotangent], &inputs, false).unwrap();
        let reference_grads =
            rumus::autograd::grad_with(&[&reference], &[&cotangent], &inputs, false).unwrap();
        for (name, (a, b)) in ["dq", "dk", "dv"]
            .iter()
            .zip(fused_grads.iter().zip(&reference_grads))
        {
            close(a, b, name);
        }
    }
}

/// Keys and values read in place from views (a cache narrowed to the tokens so far, one
/// key/value head broadcast to every query head, a transposed `[B, S, H, d]`) give the same
/// outputs and gradients, bit for bit, as the same tensors made contiguous first.
#[test]
fn views_of_a_cache_give_what_contiguous_operands_give() {
    let _serial = serial();
    let leaf = |dims: &[usize], seed| randn(dims, seed).requires_grad_().unwrap();
    let q = leaf(&[2, 3, 70, 8], 11);
    let cache_k = leaf(&[2, 3, 200, 8], 12);
    let cache_v = leaf(&[2, 3, 200, 5], 13);
    let shared_k = leaf(&[2, 1, 150, 8], 14);
    let shared_v = leaf(&[2, 1, 150, 5], 15);
    let tokens_first_k = leaf(&[2, 150, 3, 8], 16);
    let tokens_first_v = leaf(&[2, 150, 3, 5], 17);
    let cotangent = randn(&[2, 3, 70, 5], 18);
    let views = [
        (
            "narrowed cache",
            cache_k.narrow(2, 20, 150).unwrap(),
            cache_v.narrow(2, 20, 150).unwrap(),
        ),
        (
            "one head for three",
            shared_k.broadcast_to(&[2, 3, 150, 8]).unwrap(),
            shared_v.broadcast_to(&[2, 3, 150, 5]).unwrap(),
        ),
        (
            "transposed",
            tokens_first_k.transpose(1, 2).unwrap(),
            tokens_first_v.transpose(1, 2).unwrap(),
        ),
    ];
    for (what, k, v) in views {
        for causal in [false, true] {
            let options = SdpaOptions {
                key_padding_mask: None,
                causal,
                scale: None,
                dropout_p: 0.0,
            };
            let (k_copy, v_copy) = (k.contiguous().unwrap(), v.contiguous().unwrap());
            let in_place = q.scaled_dot_product_attention(&k, &v, options).unwrap();
            let copied = q
                .scaled_dot_product_attention(&k_copy, &v_copy, options)
                .unwrap();
            assert_eq!(
                in_place.to_f64_vec(),
                copied.to_f64_vec(),
                "{what}, causal {causal}"
            );
            let grads = |out: &DynTensor, k: &DynTensor, v: &DynTensor| {
                rumus::autograd::grad_with(&[out], &[&cotangent], &[&q, k, v], false).unwrap()
            };
            let (a, b) = (grads(&in_place, &k, &v), grads(&copied, &k_copy, &v_copy));
            for (name, (a, b)) in ["dq", "dk", "dv"].iter().zip(a.iter().zip(&b)) {
                assert_eq!(
                    a.to_f64_vec(),
                    b.to_f64_vec(),
                    "{what}, causal {causal}: {name}"
                );
            }
        }
    }
}

#[test]
fn memory_stays_linear_in_the_sequence_length() {
    let _serial = serial();
    // 4096 queries and keys: the scores alone would be 64 MiB in f32.
    let (t, d) = (4096, 16);
    let leaf = |seed| {
        randn(&[1, 1, t, d], seed)
            .to_dtype(DType::F32)
            .unwrap()
            .requires_grad_()
            .unwrap()
    };
    let (q, k, v) = (leaf(11), leaf(12), leaf(13));
    let peak = StoragePeak::start();
    let before = rumus::storage::live_storage_bytes();
    let options = SdpaOptions {
        causal: true,
        ..Default::default()
    };
    let out = q.scaled_dot_product_attention(&k, &v, options).unwrap();
    let grads = out.sum_all().unwrap().backward().unwrap();
    assert_eq!(grads.grad(&q).unwrap().dims(), [1, 1, t, d]);
    let used = peak.bytes() - before;
    let row = t * d * 4;
    eprintln!("peak of forward and backward at T = {t}: {used} bytes ({row} per [T, D] tensor)");
    assert!(used < 16 * row, "{used} bytes: more than linear in T");
}

#[test]
fn mismatched_operands_and_masks_are_errors_that_say_what_is_expected() {
    let _serial = serial();
    let q = randn(&[2, 4, 8], 1);
    let error = q
        .scaled_dot_product_attention(
            &randn(&[2, 5, 6], 2),
            &randn(&[2, 5, 6], 3),
            SdpaOptions::default(),
        )
        .unwrap_err()
        .to_string();
    assert!(error.contains("share their leading dims"), "{error}");
    let mask = DynTensor::from_vec(vec![false; 4], &[4]).unwrap();
    let options = SdpaOptions {
        key_padding_mask: Some(&mask),
        ..Default::default()
    };
    let error = q
        .scaled_dot_product_attention(&q, &q, options)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("key_padding_mask must be bool [2, 4]"),
        "{error}"
    );
    for dropout_p in [1.0, -0.5, f64::NAN] {
        let options = SdpaOptions {
            dropout_p,
            ..Default::default()
        };
        let error = q
            .scaled_dot_product_attention(&q, &q, options)
            .unwrap_err()
            .to_string();
        assert!(error.contains("outside [0, 1)"), "{dropout_p}: {error}");
    }
}

/// A query that sees no key gives zeros and passes no gradient back, as PyTorch's
/// `scaled_dot_product_attention` (since 2.5); the queries that see keys are untouched by
/// the others.
#[test]
fn a_query_that_sees_no_key_gives_zeros_and_no_gradient() {
    let _serial = serial();
    let leaf = |dims: &[usize], seed| randn(dims, seed).requires_grad_().unwrap();
    let (q, k, v) = (
        leaf(&[2, 3, 6, 4], 31),
        leaf(&[2, 3, 9, 4], 32),
        leaf(&[2, 3, 9, 5], 33),
    );
    let options = |mask| SdpaOptions {
        key_padding_mask: Some(mask),
        ..Default::default()
    };
    let unseen = sample_1_sees_no_key(9);
    let out = q
        .scaled_dot_product_attention(&k, &v, options(&unseen))
        .unwrap();
    let grads = out.tanh().unwrap().sum_all().unwrap().backward().unwrap();
    let sample = |x: &DynTensor, i: usize| x.narrow(0, i, 1).unwrap().to_f64_vec();
    assert!(
        sample(&out, 1).iter().all(|&x| x == 0.0),
        "output of sample 1"
    );
    for (name, x) in [("dq", &q), ("dk", &k), ("dv", &v)] {
        let grad = grads.grad(x).unwrap();
        assert!(
            sample(grad, 1).iter().all(|&g| g == 0.0),
            "{name} of sample 1"
        );
    }
    // Sample 0 alone, with its own padding: the same numbers.
    let first = |x: &DynTensor| x.narrow(0, 0, 1).unwrap();
    let alone = first(&q)
        .scaled_dot_product_attention(&first(&k), &first(&v), options(&first(&unseen)))
        .unwrap();
    assert_eq!(sample(&out, 0), alone.to_f64_vec());
}

#[test]
fn gpu_attention_matches_the_fused_cpu_op() {
    let (_serial, _gpu_serial) = (serial(), common::gpu::serial());
    let Some(device) = common::gpu::gpu() else {
        return;
    };
    let t = |dims: &[usize], seed| common::gpu::tensor(dims, seed).requires_grad_().unwrap();
    let run = |q: &DynTensor, k: &DynTensor, v: &DynTensor, options: SdpaOptions| {
        let out = q.scaled_dot_product_attention(k, v, options).unwrap();
        let grads = out.tanh().unwrap().sum_all().unwrap().backward().unwrap();
        let mut all = vec![out.clone()];
        all.extend([q, k, v].map(|x| grads.grad(x).unwrap().clone()));
        all
    };
    let on = |x: &DynTensor| x.to(&device).unwrap().requires_grad_().unwrap();
    // Padding; causal over more than one workgroup of rows and several staged tiles; both,
    // with rows of other widths (the kernels pad them to 16, 32, 64 or 128).
    // The last two with dropout, which draws the same elements on the CPU and the GPU.
    let padded: Option<fn(usize) -> DynTensor> = Some(padding);
    let unseen: Option<fn(usize) -> DynTensor> = Some(sample_1_sees_no_key);
    let cases = [
        ((9, 11), (8, 3), padded, false, 0.0),
        ((130, 150), (8, 3), None, true, 0.0),
        ((70, 150), (8, 3), padded, true, 0.0),
        ((33, 40), (40, 24), padded, true, 0.0),
        ((20, 17), (128, 100), None, false, 0.0),
        ((130, 150), (8, 3), padded, true, 0.3),
        ((33, 40), (40, 24), None, false, 0.5),
        // Long enough that lavapipe, which ends an invocation's loops after 65,535 iterations,
        // gets the walk over the other side in several passes (2 to 5 per kernel).
        ((600, 700), (64, 64), padded, false, 0.0),
        ((700, 600), (128, 100), None, true, 0.3),
        // No queries; no keys (zeros, as a query row that sees no key).
        ((0, 11), (8, 3), None, true, 0.0),
        ((9, 0), (8, 3), None, false, 0.0),
        // Queries that see no key, in the kernels and in the composite form (rows wider
        // than the kernels keep).
        ((9, 11), (8, 3), unseen, true, 0.0),
        ((9, 11), (136, 3), unseen, false, 0.3),
    ];
    for (lengths, (d, dv), mask, causal, dropout_p) in cases {
        let (q, k, v) = (
            t(&[2, 2, lengths.0, d], 1),
            t(&[2, 2, lengths.1, d], 2),
            t(&[2, 2, lengths.1, dv], 3),
        );
        let mask = mask.map(|mask| mask(lengths.1));
        let gpu_mask = mask.as_ref().map(|mask| mask.to(&device).unwrap());
        let options = |mask| SdpaOptions {
            key_padding_mask: mask,
            causal,
            scale: None,
            dropout_p,
        };
        rumus::manual_seed(29);
        let cpu = run(&q, &k, &v, options(mask.as_ref()));
        rumus::manual_seed(29);
        let gpu = run(&on(&q), &on(&k), &on(&v), options(gpu_mask.as_ref()));
        for (name, (c, g)) in ["out", "dq", "dk", "dv"].iter().zip(cpu.iter().zip(&gpu)) {
            let what = format!("{name} {lengths:?} causal {causal} dropout {dropout_p}");
            common::gpu::assert_close(&what, c, g);
        }
    }
}

/// `|want - got| <= tolerance * max(1, the largest |want|)` element by element.
fn assert_near(what: &str, want: &DynTensor, got: &DynTensor, tolerance: f64) {
    assert_eq!(want.dims(), got.dims(), "{what}: shapes differ");
    let (want, got) = (want.to_f64_vec(), got.to_f64_vec());
    let largest = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert!(
            (w - g).abs() <= tolerance * largest.max(1.0),
            "{what}, element {i}: expected {w}, got {g}"
        );
    }
}

/// A `MultiheadAttention<E, H>` with `dropout` (training mode) on `[1, t, E]` on `device`,
/// run both ways with the same seed: the composite form (asked for its weights, which only
/// it gives) and the form `forward_dyn` picks. Returns each form's output and the gradients
/// of the input and the projections, how far the second run raised the GPU's memory peak,
/// and the kernels the second run dispatched (where the adapter can tell).
fn multi_head_attention_both_ways<const E: usize, const H: usize>(
    device: &Device,
    t: usize,
    dropout: f64,
    under_autocast: bool,
) -> ([Vec<DynTensor>; 2], u64, Option<Vec<String>>) {
    use rumus::nn::{Module, MultiheadAttention};
    rumus::manual_seed(29);
    let mut attention = MultiheadAttention::<E, H>::with_options(dropout, true).unwrap();
    attention.to_device(device.clone()).unwrap();
    let x = common::gpu::tensor(&[1, t, E], 4)
        .to(device)
        .unwrap()
        .requires_grad_()
        .unwrap();
    let run = |with_weights: bool| {
        rumus::manual_seed(31);
        let out = {
            let _autocast = under_autocast.then(rumus::amp::autocast);
            if with_weights {
                attention
                    .forward_with_weights(&x, &x, &x, None, true)
                    .unwrap()
                    .0
            } else {
                attention.forward_dyn(&x, &x, &x, None, true).unwrap()
            }
        };
        let grads = out.tanh().unwrap().sum_all().unwrap().backward().unwrap();
        let mut all = vec![out.clone()];
        all.extend(
            [&x, &attention.in_proj_weight, &attention.out_proj.weight]
                .map(|t| grads.grad(t).unwrap().clone()),
        );
        all
    };
    let composite = run(true);
    device.synchronize().unwrap();
    let peak = StoragePeak::start();
    let base = rumus::storage::live_storage_bytes();
    let picked = run(false);
    let grown = (peak.bytes() - base) as u64;
    let kernels = kernels_run(device, || {
        run(false);
    });
    ([composite, picked], grown, kernels)
}

#[test]
fn gpu_multi_head_attention_over_long_sequences_runs_fused_and_agrees() {
    let (_serial, _gpu_serial) = (serial(), common::gpu::serial());
    let Some(device) = common::gpu::gpu() else {
        return;
    };
    // Without dropout and with it (in training mode, the same seed for both forms).
    for dropout in [0.0, 0.2] {
        let ([composite, fused], grown, _) =
            multi_head_attention_both_ways::<32, 2>(&device, 512, dropout, false);
        // One head's [512, 512] scores alone are 1 MiB; the fused form never holds them.
        assert!(grown < 1 << 20, "{grown} bytes: the scores were in memory");
        // Gradients summed over 512 positions in another order: the rounding is relative to
        // the terms, so to the tensor's scale, not to each element.
        for (name, (c, f)) in ["out", "dx", "d in_proj", "d out_proj"]
            .iter()
            .zip(composite.iter().zip(&fused))
        {
            assert!(f.device().is_gpu(), "{name} left the GPU");
            assert_near(&format!("{name}, dropout {dropout}"), c, f, 1e-5);
        }
    }
}

/// Under autocast, with heads 64 wide, short sequences with dropout take the fused kernels
/// too where the GPU has matrix units (elsewhere both runs are the composite form). The two
/// forms round at different places (the composite form rounds the normalised probabilities
/// to f16, the fused one exp(score - running maximum)), so they agree to f16's precision.
#[test]
fn gpu_multi_head_attention_under_autocast_with_dropout_agrees_with_the_composite_form() {
    let (_serial, _gpu_serial) = (serial(), common::gpu::serial());
    let Some(device) = common::gpu::gpu() else {
        return;
    };
    let ([composite, picked], _, kernels) =
        multi_head_attention_both_ways::<128, 2>(&device, 100, 0.2, true);
    let entries: &[&str] = if device.is_cuda() {
        &[
            "attention_forward_half_d64",
            "attention_dq_half_d64",
            "attention_dkv_half_d64",
        ]
    } else {
        &[
            "attention_forward_coop",
            "attention_backward_dq_coop",
            "attention_backward_dkv_coop",
        ]
    };
    if common::gpu::attention_on_matrix_units(
        &device,
        "that autocast runs attention on matrix units",
    ) && let Some(kernels) = kernels
    {
        for entry in entries {
            assert!(
                kernels.iter().any(|k| k == entry),
                "{entry} did not run: {kernels:?}"
            );
        }
    }
    for (name, (c, p)) in ["out", "dx", "d in_proj", "d out_proj"]
        .iter()
        .zip(composite.iter().zip(&picked))
    {
        assert!(p.device().is_gpu(), "{name} left the GPU");
        assert_near(name, c, p, 4e-3);
    }
}

/// The values of `x` (`[B, H, T, 64]`, on the GPU) as a view with the heads inside the rows
/// and an offset: the second half of each row of `[B, T, H, 128]` storage, transposed.
fn heads_inside_rows(x: &DynTensor) -> DynTensor {
    let rows = x.transpose(1, 2).unwrap().contiguous().unwrap();
    let storage = DynTensor::cat(&[&rows.mul_scalar(-3.0).unwrap(), &rows], -1).unwrap();
    storage.narrow(-1, 64, 64).unwrap().transpose(1, 2).unwrap()
}

/// `x` rounded to `dtype` (f16 or bf16), as f64.
fn rounded_to(x: &DynTensor, dtype: DType) -> DynTensor {
    x.to_dtype(dtype).unwrap().to_dtype(DType::F64).unwrap()
}

/// Autocast's attention spelled out in f64 from its definition (`ops::attention`): q, k, v
/// and dO rounded to `rounded` (f16 or bf16), and the probabilities and score gradients
/// before the products they feed second; everything else exact. `rounded` `None`: plain
/// attention. `dropout`: each
/// probability's factor (0 or 1 / (1 - p)). Returns the output and the gradients of q, k, v
/// for the output gradient `d_out`.
fn spelled_out_with_roundings(
    [q, k, v]: [&DynTensor; 3],
    d_out: &DynTensor,
    (mask, causal): (Option<&DynTensor>, bool),
    dropout: Option<&DynTensor>,
    rounded: Option<DType>,
) -> [DynTensor; 4] {
    let r = |x: &DynTensor| match rounded {
        Some(dtype) => rounded_to(x, dtype),
        None => x.clone(),
    };
    let (q16, k16, v16, g16) = (r(q), r(k), r(v), r(d_out));
    let scale = 1.0 / (q.dims()[3] as f64).sqrt();
    let p = probabilities(&q16, &k16, mask, causal);
    // Dropout's factors (0 or 1 / (1 - p)) on the probabilities and on dP.
    let dropped = |x: DynTensor| match dropout {
        Some(factors) => x.mul(factors).unwrap(),
        None => x,
    };
    let kept = dropped(p.clone());
    let out = r(&kept).matmul(&v16).unwrap();
    let t = |x: &DynTensor| x.transpose(-1, -2).unwrap();
    let dv = t(&r(&kept)).matmul(&g16).unwrap();
    let dp = dropped(g16.matmul(&t(&v16)).unwrap());
    let correction = d_out.mul(&out).unwrap().sum(&[-1], true).unwrap();
    let ds = p
        .mul(&dp.sub(&correction).unwrap())
        .unwrap()
        .mul_scalar(scale)
        .unwrap();
    let dq = r(&ds).matmul(&k16).unwrap();
    let dk = t(&r(&ds)).matmul(&q16).unwrap();
    [out, dq, dk, dv]
}

/// Under autocast, a GPU with cooperative matrices runs rows of 64 on them in f16
/// (`attention_coop.wgsl`); elsewhere autocast leaves the fused attention in f32. Either
/// way the output and gradients match the definition, spelled out in f64 with the roundings
/// that apply (lengths that are not multiples of the 64-row tiles, several tiles, causal
/// with T != S, padding).
#[test]
fn gpu_attention_under_autocast_matches_its_definition() {
    let (_serial, _gpu_serial) = (serial(), common::gpu::serial());
    let Some(device) = common::gpu::gpu() else {
        return;
    };
    // Without matrix units the checks of the matrix-unit kernels (no copies of the head
    // views, results in their operands' layouts) are skipped, saying so.
    let on_matrix_units = common::gpu::attention_on_matrix_units(
        &device,
        "that the matrix-unit kernels read head views in place",
    );
    // `rising`: scores that grow by about 5 per tile of 64 keys, so that every tile moves
    // every row's running maximum (the forward kernel's rescaling path), where random scores
    // settle after the first tiles. `heads_view`: the operands and the output's gradient as
    // [B, H, T, 64] views of [B, T, H, *] storage, as multi-head attention splits its heads.
    let cases = [
        ((150, 150), false, true, 0.0, false),
        ((70, 150), true, true, 0.0, false),
        ((130, 90), true, false, 0.0, false),
        ((70, 150), true, true, 0.3, false),
        ((200, 200), false, false, 0.0, false),
        ((200, 200), false, true, 0.0, true),
        ((100, 260), true, false, 0.2, true),
    ];
    // On CUDA under bf16 autocast too (wgpu has no bf16).
    let dtypes: &[DType] = if device.is_cuda() {
        &[DType::F16, DType::BF16]
    } else {
        &[DType::F16]
    };
    let runs = dtypes.iter().flat_map(|&dtype| {
        cases
            .into_iter()
            .flat_map(|case| [(case, false), (case, true)])
            .map(move |run| (dtype, run))
    });
    for (dtype, (((t, s), masked, causal, dropout_p, rising), heads_view)) in runs {
        let [mut q, mut k, v, d_out] = [(t, 1), (s, 2), (s, 3), (t, 4)]
            .map(|(rows, seed)| common::gpu::tensor(&[2, 2, rows, 64], seed));
        if rising {
            // q about all ones, key j about 0.01 j times all ones: score(i, j) ~ 0.08 j.
            let key_index: Vec<f32> = (0..4 * s * 64)
                .map(|e| 0.01 * ((e / 64) % s) as f32)
                .collect();
            let key_index = DynTensor::from_vec(key_index, &[2, 2, s, 64]).unwrap();
            q = q.mul_scalar(0.1).unwrap().add_scalar(1.0).unwrap();
            k = k.mul_scalar(0.1).unwrap().add(&key_index).unwrap();
        }
        let mask = padding(s);
        let options = |mask| SdpaOptions {
            key_padding_mask: masked.then_some(mask),
            causal,
            scale: None,
            dropout_p,
        };
        let on = |x: &DynTensor| {
            let x = x.to(&device).unwrap();
            let x = if heads_view { heads_inside_rows(&x) } else { x };
            x.requires_grad_().unwrap()
        };
        let (gq, gk, gv) = (on(&q), on(&k), on(&v));
        let gpu_mask = mask.to(&device).unwrap();
        rumus::manual_seed(37);
        let attend = || {
            let _autocast = rumus::amp::autocast_with(dtype).unwrap();
            gq.scaled_dot_product_attention(&gk, &gv, options(&gpu_mask))
                .unwrap()
        };
        let out = attend();
        // On the matrix units the kernels read the head views where they lie: no copies.
        if heads_view
            && on_matrix_units
            && let Some(kernels) = kernels_run(&device, || {
                attend();
            })
        {
            assert!(
                !kernels.iter().any(|k| k.starts_with("copy")),
                "the operands were copied: {kernels:?}"
            );
        }
        // The same draws as a dropout of the [2, 2, T, S] probabilities: of ones, they are
        // the factors.
        rumus::manual_seed(37);
        let ones = DynTensor::ones(&[2, 2, t, s], DType::F64).unwrap();
        let factors = rumus::nn::functional::dropout(&ones, dropout_p, true).unwrap();
        // Backward outside the scope: it runs the forward pass's kernels all the same. With
        // `heads_view` the output's gradient arrives as a view too: the gradient of the
        // heads merged back, [B, T, H, 64].
        let gpu_d_out = d_out.to(&device).unwrap();
        let loss = if heads_view {
            let merged = out.transpose(1, 2).unwrap();
            let d_merged = gpu_d_out.transpose(1, 2).unwrap().contiguous().unwrap();
            merged.mul(&d_merged).unwrap()
        } else {
            out.mul(&gpu_d_out).unwrap()
        };
        let grads = loss.sum_all().unwrap().backward().unwrap();
        let got = [
            out.clone(),
            grads.grad(&gq).unwrap().clone(),
            grads.grad(&gk).unwrap().clone(),
            grads.grad(&gv).unwrap().clone(),
        ];
        let f64s = [&q, &k, &v, &d_out].map(|x| x.to_dtype(DType::F64).unwrap());
        let expected = spelled_out_with_roundings(
            [&f64s[0], &f64s[1], &f64s[2]],
            &f64s[3],
            (masked.then_some(&mask), causal),
            (dropout_p > 0.0).then_some(&factors),
            on_matrix_units.then_some(dtype),
        );
        // f16's unit roundoff is 2^-11: a rounding of a probability that lands on the other
        // side of a tie between the two computations moves a sum by about that much. (The
        // forward kernel rounds exp(score - the row's running maximum) and divides by the
        // sum at the end, where this rounds the normalised probability: the same relative
        // error per probability, at another place.)
        // (bf16's unit roundoff is 2^-8, eight times f16's.)
        let tolerance = match (on_matrix_units, dtype) {
            (false, _) => 1e-5,
            (true, DType::BF16) => 1.6e-2,
            (true, _) => 2e-3,
        };
        for (name, (want, got)) in ["out", "dq", "dk", "dv"]
            .iter()
            .zip(expected.iter().zip(&got))
        {
            assert!(got.device().is_gpu(), "{name} left the GPU");
            let what = format!(
                "{name} {dtype} ({t}, {s}) causal {causal} masked {masked} dropout {dropout_p} \
                 rising {rising} heads_view {heads_view} (matrix units: {on_matrix_units})"
            );
            assert_near(&what, want, got, tolerance);
            // On the matrix units the kernels read the views in place and write each
            // result in its operand's layout: merging the heads back is free.
            if heads_view && on_matrix_units {
                let merged = got.transpose(1, 2).unwrap();
                assert!(
                    merged.is_contiguous(),
                    "{what}: came back in another layout"
                );
            }
        }
    }
}

/// Under autocast the GPU attention (on the matrix units where the adapter has them) keeps
/// memory linear in the sequence length too: no [T, T] matrix, forward or backward.
#[test]
fn gpu_attention_under_autocast_keeps_memory_linear() {
    let (_serial, _gpu_serial) = (serial(), common::gpu::serial());
    let Some(device) = common::gpu::gpu() else {
        return;
    };
    // 2048 queries and keys: the scores alone would be 16 MiB in f32.
    let (t, d) = (2048, 64);
    let leaf = |seed| {
        common::gpu::tensor(&[1, 1, t, d], seed)
            .to(&device)
            .unwrap()
            .requires_grad_()
            .unwrap()
    };
    let (q, k, v) = (leaf(21), leaf(22), leaf(23));
    device.synchronize().unwrap();
    let peak = StoragePeak::start();
    let before = rumus::storage::live_storage_bytes();
    let out = {
        let _autocast = rumus::amp::autocast();
        let options = SdpaOptions {
            causal: true,
            ..Default::default()
        };
        q.scaled_dot_product_attention(&k, &v, options).unwrap()
    };
    let grads = out.sum_all().unwrap().backward().unwrap();
    assert_eq!(grads.grad(&k).unwrap().dims(), [1, 1, t, d]);
    device.synchronize().unwrap();
    let used = peak.bytes() - before;
    let row = t * d * 4;
    assert!(used < 16 * row, "{used} bytes: more than linear in T");
}
