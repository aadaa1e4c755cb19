//! Code written with `#[model]` and `tensor_fn!` computes the same values and gradients as the
//! same model written with the plain API, and the module machinery works.

use rumus::nn::{Linear, Module};
use rumus::prelude::*;

rumus::tensor_fn! {
    /// Attention scores of queries against keys.
    fn scores(q: [B, T, 8], k: [B, T, 8]) -> [B, T, T] {
        let s = q @ k.transpose(1, 2);
        (s * 0.25).softmax(-1)
    }

    fn heads(x: [B, T, 12]) -> [B, T, 12] {
        let h = x.split_heads(3);
        let merged = h.merge_heads();
        merged + x
    }
}

rumus::tensor_fn! {
    /// Calls another tensor function; its result shape is declared and checked by the types.
    fn double_scores(q: [B, T, 8]) -> [B, T, T] {
        let s: [B, T, T] = scores(q, q);
        s.view([B, T, T]) * 2.0
    }
}

rumus::tensor_fn! {
    fn sine(x: [B, 7]) -> [B, 7] {
        x.sin()
    }

    fn cosine(x: [B, 7]) -> [B, 7] {
        x.cos()
    }

    fn floored(x: [B, 7]) -> [B, 7] {
        floor(x)
    }
}

#[model]
struct Mlp {
    fc1: Linear<6, 16>,
    fc2: Linear<16, 3>,
}

#[model]
impl Mlp {
    tensor_fn! {
        fn forward(&self, x: [B, 6]) -> [B, 3] {
            let h = self.fc1(x).tanh();
            self.fc2(h).log_softmax(1)
        }
    }
}

#[model(sequential, activation = relu)]
struct Chain {
    a: Linear<4, 8>,
    b: Linear<8, 2>,
}

fn close(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-6 * (1.0 + y.abs()))
}

#[test]
fn model_forward_matches_the_plain_api_in_values_and_gradients() {
    manual_seed(1);
    let model = Mlp::new().unwrap();
    let x = Tensor::<(Dyn, D<6>)>::randn_with_dims(&[5, 6]).unwrap();
    let out = model.forward(&x).unwrap();
    let grads = out.sum_all().backward().unwrap();

    let plain = model
        .fc2
        .forward(&model.fc1.forward(&x).tanh())
        .log_softmax();
    let plain_grads = plain.sum_all().backward().unwrap();
    assert!(close(&out.to_vec().unwrap(), &plain.to_vec().unwrap()));
    for p in model.parameters() {
        assert!(close(
            &grads.grad(&p).unwrap().to_vec::<f32>().unwrap(),
            &plain_grads.grad(&p).unwrap().to_vec::<f32>().unwrap()
        ));
    }
}

#[test]
fn tensor_fn_matches_the_plain_api() {
    manual_seed(2);
    let q = Tensor::<(Dyn, Dyn, D<8>)>::randn_with_dims(&[2, 3, 8])
        .unwrap()
        .requires_grad_()
        .unwrap();
    let k = Tensor::<(Dyn, Dyn, D<8>)>::randn_with_dims(&[2, 3, 8]).unwrap();
    let s = scores(&q, &k).unwrap();
    let plain = q
        .as_dyn()
        .matmul(&k.as_dyn().transpose(1, 2).unwrap())
        .unwrap()
        .mul_scalar(0.25)
        .unwrap()
        .softmax(-1)
        .unwrap();
    assert!(close(&s.to_vec().unwrap(), &plain.to_vec::<f32>().unwrap()));
    // Weight the outputs so the gradient is not trivially zero (softmax rows sum to one).
    let weights = DynTensor::randn(&[2, 3, 3], DType::F32).unwrap();
    let g1 = s
        .as_dyn()
        .mul(&weights)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    let g2 = plain
        .mul(&weights)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    let a = g1.grad(q.as_dyn()).unwrap().to_vec::<f32>().unwrap();
    let b = g2.grad(q.as_dyn()).unwrap().to_vec::<f32>().unwrap();
    assert!(close(&a, &b), "{a:?} vs {b:?}");
    assert!(a.iter().any(|v| v.abs() > 1e-4));

    let x = Tensor::<(Dyn, Dyn, D<12>)>::randn_with_dims(&[2, 4, 12]).unwrap();
    let doubled = heads(&x).unwrap();
    let expected: Vec<f32> = x.to_vec().unwrap().iter().map(|v| 2.0 * v).collect();
    assert!(
        close(&doubled.to_vec().unwrap(), &expected),
        "split then merge is the identity"
    );
}

#[test]
fn sin_cos_floor_in_tensor_fn_match_the_typed_methods_and_std() {
    let values = [-2.5f32, -1.0, -0.25, 0.0, 0.75, 1.5, 3.0];
    let x = Tensor::<(Dyn, D<7>)>::from_vec_with_dims(values.to_vec(), &[1, 7]).unwrap();
    type Row = Tensor<(Dyn, D<7>)>;
    type Case = (
        &'static str,
        fn(&Row) -> rumus::Result<Row>,
        Row,
        fn(f32) -> f32,
    );
    let cases: [Case; 3] = [
        ("sin", sine, x.sin(), f32::sin),
        ("cos", cosine, x.cos(), f32::cos),
        ("floor", floored, x.floor(), f32::floor),
    ];
    for (name, macro_fn, typed, reference) in cases {
        let out = macro_fn(&x).unwrap();
        assert_eq!(out.dims(), &[1, 7], "{name}");
        assert_eq!(out.to_vec().unwrap(), typed.to_vec().unwrap(), "{name}");
        let expected: Vec<f32> = values.iter().map(|&v| reference(v)).collect();
        assert!(close(&out.to_vec().unwrap(), &expected), "{name}");
    }
}

#[test]
fn runtime_dims_are_checked_once_at_entry() {
    let q = Tensor::<(Dyn, Dyn, D<8>)>::zeros_with_dims(&[2, 3, 8]).unwrap();
    let k = Tensor::<(Dyn, Dyn, D<8>)>::zeros_with_dims(&[2, 4, 8]).unwrap();
    let err = scores(&q, &k).unwrap_err().to_string();
    assert!(
        err.contains("`T`") && err.contains('3') && err.contains('4'),
        "{err}"
    );
}

#[test]
fn module_machinery() {
    manual_seed(3);
    let model = Mlp::new().unwrap();
    let names: Vec<String> = model
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]);
    assert_eq!(model.num_parameters(), 6 * 16 + 16 + 16 * 3 + 3);

    let other = Mlp::new().unwrap();
    other.load_state_dict(&model.state_dict().unwrap()).unwrap();
    let x = Tensor::<(Dyn, D<6>)>::randn_with_dims(&[2, 6]).unwrap();
    assert_eq!(
        other.forward(&x).unwrap().to_vec().unwrap(),
        model.forward(&x).unwrap().to_vec().unwrap()
    );

    let mut state = model.state_dict().unwrap();
    state.pop();
    let err = other.load_state_dict(&state).unwrap_err().to_string();
    assert!(err.contains("fc2.bias"), "{err}");

    let summary = model.to_string();
    assert!(
        summary.contains("(fc1): Linear(in_features=6, out_features=16, bias=true)"),
        "{summary}"
    );
    assert!(summary.contains("Trainable parameters: 163"), "{summary}");
}

#[test]
fn sequential_models_chain_their_layers() {
    manual_seed(4);
    let chain = Chain::new().unwrap();
    let x = Tensor::<(D<3>, D<4>)>::randn();
    let y = chain.forward(&x).unwrap();
    let plain = chain.b.forward(&chain.a.forward(&x).relu());
    assert!(close(&y.to_vec().unwrap(), &plain.to_vec().unwrap()));
}

/// A module that records the training flag it was given.
#[derive(Default)]
struct Probe {
    training: std::cell::Cell<Option<bool>>,
}

impl Probe {
    fn new() -> rumus::Result<Self> {
        Ok(Probe::default())
    }
}

impl Module for Probe {
    fn visit(&self, _prefix: &str, _f: &mut dyn FnMut(&str, &DynTensor)) {}
    fn set_training(&self, training: bool) {
        self.training.set(Some(training));
    }
    fn describe(&self) -> String {
        "Probe".into()
    }
}

#[model]
struct WithExtras {
    probe: Probe,
    fc: Linear<2, 2>,
    #[skip]
    label: String,
}

#[test]
fn train_eval_propagate_and_skipped_fields_are_not_modules() {
    let mut model = WithExtras::new().unwrap();
    model.eval();
    assert_eq!(model.probe.training.get(), Some(false));
    model.train();
    assert_eq!(model.probe.training.get(), Some(true));
    assert_eq!(model.label, "");
    let names: Vec<String> = model
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["fc.weight", "fc.bias"]);
    model.to_device(rumus::nn::Device::Cpu).unwrap();
}

#[test]
fn tensor_fns_call_each_other() {
    let q = Tensor::<(Dyn, Dyn, D<8>)>::randn_with_dims(&[2, 3, 8]).unwrap();
    let twice = double_scores(&q).unwrap().to_vec().unwrap();
    let once = scores(&q, &q).unwrap().to_vec().unwrap();
    assert!(close(
        &twice,
        &once.iter().map(|v| 2.0 * v).collect::<Vec<_>>()
    ));
}
