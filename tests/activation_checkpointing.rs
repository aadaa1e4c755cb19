//! Activation checkpointing: a segment recomputed in the backward pass gives the gradients it
//! would give without checkpointing (finite differences, and the plain graph bit for bit with
//! dropout inside), and a checkpointed stack holds less memory at its busiest moment.

mod common;

use common::randn;
use rumus::autograd::{GradcheckOptions, checkpoint, grad, gradcheck};
use rumus::nn::functional::dropout;
use rumus::nn::{Checkpointed, Linear, Module, TransformerEncoderBlock};
use rumus::prelude::*;
use rumus::rng;
use rumus::storage::StoragePeak;

/// The tests read the process-wide generator and byte counts: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

#[test]
fn gradients_through_a_segment_match_finite_differences() {
    let _serial = serial();
    let f = |t: &[DynTensor]| -> rumus::Result<DynTensor> {
        let (w1, w2) = (t[1].clone(), t[2].clone());
        let segment = move |inputs: &[DynTensor]| inputs[0].matmul(&w1)?.tanh()?.matmul(&w2);
        checkpoint(&[&t[0]], segment)?.sigmoid()?.sum_all()
    };
    let inputs = [randn(&[3, 4], 1), randn(&[4, 5], 2), randn(&[5, 2], 3)];
    gradcheck(f, &inputs, GradcheckOptions::default()).unwrap();
}

/// One block per weight, `dropout(tanh(tanh(x @ w) @ w))`, each checkpointed or not.
fn stack(x: &DynTensor, weights: &[DynTensor], checkpointed: bool) -> DynTensor {
    let block = |w: DynTensor| {
        move |inputs: &[DynTensor]| {
            let h = inputs[0].matmul(&w)?.tanh()?.matmul(&w)?.tanh()?;
            dropout(&h, 0.25, true)
        }
    };
    let mut h = x.clone();
    for w in weights {
        h = if checkpointed {
            checkpoint(&[&h], block(w.clone())).unwrap()
        } else {
            block(w.clone())(std::slice::from_ref(&h)).unwrap()
        };
    }
    h.powf(2.0).unwrap().mean_all().unwrap()
}

#[test]
fn a_checkpointed_stack_with_dropout_gives_the_plain_gradients_bit_for_bit() {
    let _serial = serial();
    let weights: Vec<DynTensor> = (0..4)
        .map(|i| randn(&[16, 16], 10 + i).requires_grad_().unwrap())
        .collect();
    let x = randn(&[8, 16], 9).requires_grad_().unwrap();
    let run = |checkpointed: bool| {
        rng::manual_seed(42);
        let loss = stack(&x, &weights, checkpointed);
        let grads = loss.backward().unwrap();
        let next_draw = rng::with_global(|g| g.next_u64());
        let mut all = vec![loss.to_f64_vec()];
        all.push(grads.grad(&x).unwrap().to_f64_vec());
        all.extend(weights.iter().map(|w| grads.grad(w).unwrap().to_f64_vec()));
        (all, next_draw)
    };
    let (plain, plain_draw) = run(false);
    let (recomputed, recomputed_draw) = run(true);
    assert_eq!(plain, recomputed, "loss and gradients differ");
    assert_eq!(
        plain_draw, recomputed_draw,
        "the backward pass left the generator elsewhere"
    );
    // The draws matter: another seed drops other elements.
    rng::manual_seed(43);
    assert_ne!(stack(&x, &weights, true).to_f64_vec(), plain[0]);
}

#[test]
fn a_checkpointed_stack_needs_less_memory_at_its_peak() {
    let _serial = serial();
    // Activations much larger than the weights, whose gradients all live to the end.
    let (width, depth, batch) = (64, 12, 1024);
    let weights: Vec<DynTensor> = (0..depth)
        .map(|i| {
            randn(&[width, width], 100 + i as u64)
                .to_dtype(DType::F32)
                .unwrap()
                .requires_grad_()
                .unwrap()
        })
        .collect();
    let x = randn(&[batch, width], 7).to_dtype(DType::F32).unwrap();
    let measure = |checkpointed: bool| {
        let peak = StoragePeak::start();
        let before = rumus::storage::live_storage_bytes();
        let loss = stack(&x, &weights, checkpointed);
        let held = rumus::storage::live_storage_bytes() - before;
        let grads = loss.backward().unwrap();
        drop((loss, grads));
        (held, peak.bytes() - before)
    };
    let (plain_held, plain_peak) = measure(false);
    let (held, peak) = measure(true);
    let activation = batch * width * 4;
    eprintln!(
        "{depth} blocks of [{batch}, {width}]: held after the forward pass {plain_held} -> \
         {held} bytes, peak {plain_peak} -> {peak} bytes (one activation: {activation})"
    );
    // Plain: every block keeps its two tanh outputs and its dropout output. Checkpointed:
    // only each block's output; the backward pass rebuilds one block at a time.
    assert!(plain_held >= 3 * depth * activation, "{plain_held}");
    assert!(held <= (depth + 2) * activation, "{held}");
    assert!(
        (peak as f64) < 0.6 * plain_peak as f64,
        "checkpointing did not lower the peak: {plain_peak} -> {peak}"
    );
}

/// A weight, an input, and the sum of a checkpointed `tanh(x @ w)`.
fn small_checkpointed_loss() -> (DynTensor, DynTensor, DynTensor) {
    let w = randn(&[3, 3], 1).requires_grad_().unwrap();
    let x = randn(&[2, 3], 2);
    let segment = {
        let w = w.clone();
        move |inputs: &[DynTensor]| inputs[0].matmul(&w)?.tanh()
    };
    let loss = checkpoint(&[&x], segment).unwrap().sum_all().unwrap();
    (w, x, loss)
}

#[test]
fn a_recorded_backward_pass_through_a_segment_is_an_error() {
    let _serial = serial();
    let (w, _, loss) = small_checkpointed_loss();
    let error = grad(&[&loss], &[&w], true).unwrap_err().to_string();
    assert!(
        error.contains("checkpoint") && error.contains("create_graph"),
        "{error}"
    );
    // Without `create_graph` the same graph back-propagates.
    assert_eq!(grad(&[&loss], &[&w], false).unwrap()[0].dims(), [3, 3]);
}

#[test]
fn an_input_changed_in_place_before_the_backward_pass_is_an_error() {
    let _serial = serial();
    let (_, x, loss) = small_checkpointed_loss();
    x.mul_scalar_(2.0).unwrap();
    let error = loss.backward().unwrap_err().to_string();
    assert!(error.contains("checkpoint"), "{error}");
}

#[model]
struct Plain {
    fc1: Linear<6, 16>,
    block: TransformerEncoderBlock<16, 2, 32>,
    fc2: Linear<16, 3>,
}

#[model]
impl Plain {
    tensor_fn! {
        fn forward(&self, x: [B, T, 6]) -> [B, T, 3] {
            self.fc2(self.block(self.fc1(x).tanh(), causal))
        }
    }
}

/// `Plain` with its first layer and its encoder block checkpointed: the shape checker sees
/// through the wrapper, so the forward pass is written the same way.
#[model]
struct Wrapped {
    fc1: Checkpointed<Linear<6, 16>>,
    block: Checkpointed<TransformerEncoderBlock<16, 2, 32>>,
    fc2: Linear<16, 3>,
}

#[model]
impl Wrapped {
    tensor_fn! {
        fn forward(&self, x: [B, T, 6]) -> [B, T, 3] {
            self.fc2(self.block(self.fc1(x).tanh(), causal))
        }
    }
}

#[test]
fn a_checkpointed_layer_in_a_model_keeps_its_names_and_gradients() {
    let _serial = serial();
    let plain = Plain::new().unwrap();
    let wrapped = Wrapped::new().unwrap();
    wrapped
        .load_state_dict(&plain.state_dict().unwrap())
        .unwrap();
    let names = |m: &dyn Module| -> Vec<String> {
        m.named_parameters().into_iter().map(|(n, _)| n).collect()
    };
    assert_eq!(names(&plain), names(&wrapped));
    let summary = wrapped.summary("Wrapped");
    assert!(summary.contains("Checkpointed(Linear"), "{summary}");
    assert!(
        summary.contains("Checkpointed(TransformerEncoderBlock"),
        "{summary}"
    );

    let x: Tensor<(Dyn, Dyn, D<6>)> = randn(&[2, 5, 6], 3)
        .to_dtype(DType::F32)
        .unwrap()
        .try_shape()
        .unwrap();
    let grads_of = |model: &dyn Module, loss: DynTensor| -> Vec<Vec<f64>> {
        let grads = loss.backward().unwrap();
        model
            .parameters()
            .iter()
            .map(|p| grads.grad(p).unwrap().to_f64_vec())
            .collect()
    };
    let mean_square =
        |out: Tensor<(Dyn, Dyn, D<3>)>| out.erase().powf(2.0).unwrap().mean_all().unwrap();
    // The block's dropout draws from the generator: the same seed gives both models the same
    // draws, and the checkpoint replays them when it recomputes.
    rng::manual_seed(11);
    let plain_loss = mean_square(plain.forward(&x).unwrap());
    rng::manual_seed(11);
    let wrapped_loss = mean_square(wrapped.forward(&x).unwrap());
    assert_eq!(
        plain_loss.item::<f32>().unwrap(),
        wrapped_loss.item::<f32>().unwrap()
    );
    assert_eq!(
        grads_of(&plain, plain_loss),
        grads_of(&wrapped, wrapped_loss)
    );
}

#[test]
fn a_checkpointed_segment_on_the_gpu_gives_the_plain_gradients() {
    let _serial = serial();
    let Some(device) = common::gpu::gpu() else {
        return;
    };
    let on_gpu = |t: DynTensor| t.to(&device).unwrap().requires_grad_().unwrap();
    let weights: Vec<DynTensor> = (0..3)
        .map(|i| on_gpu(common::gpu::tensor(&[16, 16], 20 + i)))
        .collect();
    let x = on_gpu(common::gpu::tensor(&[8, 16], 19));
    let run = |checkpointed: bool| {
        rng::manual_seed(5);
        let grads = stack(&x, &weights, checkpointed).backward().unwrap();
        std::iter::once(&x)
            .chain(&weights)
            .map(|t| {
                let g = grads.grad(t).unwrap();
                assert!(g.device().is_gpu());
                g.to_f64_vec()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(false), run(true));
}
