//! Sequence layers against PyTorch: LSTM, GRU, MultiheadAttention and the pre-norm transformer
//! encoder block, with PyTorch's weights loaded by name; outputs and the gradients of every
//! input and parameter. Data: tests/fixtures/sequence.txt, written by
//! tests/fixtures/make_sequence_fixtures.py. Also the shape errors of these layers.

mod common;

use std::collections::BTreeMap;

use common::fixture_file::{FixtureTensor, assert_close, read_cases};
use rumus::autograd::{grad_with, no_grad};
use rumus::nn::{
    FeedForwardActivation, Gru, Lstm, Module, MultiheadAttention, TransformerEncoderBlock,
    causal_mask,
};
use rumus::prelude::*;

type Case = BTreeMap<String, FixtureTensor>;

fn tensor(t: &FixtureTensor) -> DynTensor {
    t.to_tensor()
}

fn leaf(case: &Case, key: &str) -> DynTensor {
    tensor(&case[&format!("in.{key}")])
        .requires_grad_()
        .unwrap()
}

/// Copies every `param.NAME` of the case into the layer's parameter of that name (under
/// `no_grad`); the layer's names, in order, must be `expected` and exactly the case's.
fn load(name: &str, case: &Case, layer: &dyn Module, expected: &[&str]) {
    let params = layer.named_parameters();
    let names: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, expected, "{name}: parameter names and order");
    let in_fixture: Vec<&str> = case
        .keys()
        .filter_map(|k| k.strip_prefix("param."))
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, in_fixture, "{name}: parameters in the fixture");
    let _guard = no_grad();
    for (key, p) in &params {
        p.copy_(&tensor(&case[&format!("param.{key}")])).unwrap();
    }
}

/// Checks the named outputs, then the gradients of `inputs` and of every parameter of
/// `layer` for the sum of the outputs weighted by the case's cotangents.
fn check(
    name: &str,
    case: &Case,
    outputs: &[(&str, &DynTensor)],
    inputs: &[(&str, &DynTensor)],
    layer: &dyn Module,
) {
    for (key, out) in outputs {
        assert_close(
            name,
            &format!("out.{key}"),
            out,
            &case[&format!("out.{key}")],
        );
    }
    let outs: Vec<&DynTensor> = outputs.iter().map(|(_, t)| *t).collect();
    let cots: Vec<DynTensor> = outputs
        .iter()
        .map(|(key, _)| tensor(&case[&format!("cot.{key}")]))
        .collect();
    let cot_refs: Vec<&DynTensor> = cots.iter().collect();
    let params = layer.named_parameters();
    let mut wrt: Vec<(&str, &DynTensor)> = inputs.to_vec();
    wrt.extend(params.iter().map(|(n, t)| (n.as_str(), t)));
    let refs: Vec<&DynTensor> = wrt.iter().map(|(_, t)| *t).collect();
    let grads = grad_with(&outs, &cot_refs, &refs, false).unwrap();
    let expected_grads = case.keys().filter(|k| k.starts_with("grad.")).count();
    assert_eq!(grads.len(), expected_grads, "{name}: gradient count");
    for ((key, _), g) in wrt.iter().zip(&grads) {
        let key = format!("grad.{key}");
        assert_close(name, &key, g, &case[&key]);
    }
}

const RNN_NAMES: [&str; 4] = ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"];
const MHA_NAMES: [&str; 4] = [
    "in_proj_weight",
    "in_proj_bias",
    "out_proj.weight",
    "out_proj.bias",
];
const ENCODER_NAMES: [&str; 12] = [
    "self_attn.in_proj_weight",
    "self_attn.in_proj_bias",
    "self_attn.out_proj.weight",
    "self_attn.out_proj.bias",
    "linear1.weight",
    "linear1.bias",
    "linear2.weight",
    "linear2.bias",
    "norm1.weight",
    "norm1.bias",
    "norm2.weight",
    "norm2.bias",
];

fn check_lstm(name: &str, case: &Case) {
    let layer = Lstm::<3, 4>::new().unwrap();
    load(name, case, &layer, &RNN_NAMES);
    let x = leaf(case, "x");
    if case.contains_key("in.h0") {
        let (h0, c0) = (leaf(case, "h0"), leaf(case, "c0"));
        let (out, (h, c)) = layer.forward_dyn(&x, Some((&h0, &c0))).unwrap();
        let outputs = [("output", &out), ("h_n", &h), ("c_n", &c)];
        check(
            name,
            case,
            &outputs,
            &[("x", &x), ("h0", &h0), ("c0", &c0)],
            &layer,
        );
    } else {
        let (out, (h, c)) = layer.forward_dyn(&x, None).unwrap();
        let outputs = [("output", &out), ("h_n", &h), ("c_n", &c)];
        check(name, case, &outputs, &[("x", &x)], &layer);
    }
}

fn check_gru(name: &str, case: &Case) {
    let layer = Gru::<3, 4>::new().unwrap();
    load(name, case, &layer, &RNN_NAMES);
    let x = leaf(case, "x");
    if case.contains_key("in.h0") {
        let h0 = leaf(case, "h0");
        let (out, h) = layer.forward_dyn(&x, Some(&h0)).unwrap();
        check(
            name,
            case,
            &[("output", &out), ("h_n", &h)],
            &[("x", &x), ("h0", &h0)],
            &layer,
        );
    } else {
        let (out, h) = layer.forward_dyn(&x, None).unwrap();
        check(
            name,
            case,
            &[("output", &out), ("h_n", &h)],
            &[("x", &x)],
            &layer,
        );
    }
}

/// The causal cases store PyTorch's explicit mask; rumus uses `causal = true` instead, which
/// must be that mask.
fn is_causal(case: &Case) -> bool {
    case.get("mask.attn_mask").is_some_and(|m| {
        let expected = causal_mask(m.dims[0], m.dims[1]).unwrap();
        let expected: Vec<f64> = expected
            .to_vec::<bool>()
            .unwrap()
            .into_iter()
            .map(|b| f64::from(u8::from(b)))
            .collect();
        expected == m.values
    })
}

fn check_mha(name: &str, case: &Case) {
    let layer = MultiheadAttention::<6, 2>::new().unwrap();
    load(name, case, &layer, &MHA_NAMES);
    let causal = is_causal(case);
    let bool_mask = match case.get("mask.attn_mask") {
        Some(m) if !causal => Some(tensor(m)),
        _ => None,
    };
    let float_mask = case
        .contains_key("in.attn_mask")
        .then(|| leaf(case, "attn_mask"));
    let mask = bool_mask.as_ref().or(float_mask.as_ref());
    if case.contains_key("in.x") {
        let x = leaf(case, "x");
        let (out, weights) = layer
            .forward_with_weights(&x, &x, &x, mask, causal)
            .unwrap();
        let outputs = [("output", &out), ("weights", &weights)];
        check(name, case, &outputs, &[("x", &x)], &layer);
    } else {
        let (q, k, v) = (leaf(case, "query"), leaf(case, "key"), leaf(case, "value"));
        let (out, weights) = layer
            .forward_with_weights(&q, &k, &v, mask, causal)
            .unwrap();
        let outputs = [("output", &out), ("weights", &weights)];
        let mut inputs = vec![("query", &q), ("key", &k), ("value", &v)];
        if let Some(m) = &float_mask {
            inputs.push(("attn_mask", m));
        }
        check(name, case, &outputs, &inputs, &layer);
    }
}

fn check_encoder(name: &str, case: &Case, activation: FeedForwardActivation) {
    let layer = TransformerEncoderBlock::<8, 2, 16>::with_options(0.0, activation).unwrap();
    layer.train();
    load(name, case, &layer, &ENCODER_NAMES);
    let causal = is_causal(case);
    assert_eq!(causal, case.contains_key("mask.attn_mask"), "{name}: mask");
    let x = leaf(case, "x");
    let out = layer.forward_dyn(&x, None, causal).unwrap();
    check(name, case, &[("output", &out)], &[("x", &x)], &layer);
}

#[test]
fn sequence_layers_match_pytorch() {
    let cases = read_cases(include_str!("fixtures/sequence.txt"));
    assert_eq!(cases.len(), 10);
    for (name, case) in &cases {
        match name.as_str() {
            "lstm" | "lstm_state" => check_lstm(name, case),
            "gru" | "gru_state" => check_gru(name, case),
            "mha_self" | "mha_causal" | "mha_cross_bool_mask" | "mha_cross_float_mask" => {
                check_mha(name, case)
            }
            "encoder_relu" => check_encoder(name, case, FeedForwardActivation::Relu),
            "encoder_gelu_causal" => check_encoder(name, case, FeedForwardActivation::Gelu),
            other => panic!("no rumus implementation for sequence case `{other}`"),
        }
    }
}

// ---- shape errors: returned, never panics ----

fn f32_zeros(dims: &[usize]) -> DynTensor {
    DynTensor::zeros(dims, DType::F32).unwrap()
}

fn error_of<T>(result: rumus::Result<T>) -> String {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn lstm_and_gru_reject_bad_shapes() {
    let lstm = Lstm::<3, 4>::new().unwrap();
    let gru = Gru::<3, 4>::new().unwrap();
    // Not batch first / wrong rank.
    let err = error_of(lstm.forward_dyn(&f32_zeros(&[5, 3]), None));
    assert!(
        err.contains("[batch, time, 3]") && err.contains("[5, 3]"),
        "{err}"
    );
    // Wrong feature size.
    let err = error_of(gru.forward_dyn(&f32_zeros(&[2, 5, 4]), None));
    assert!(
        err.contains("[batch, time, 3]") && err.contains("[2, 5, 4]"),
        "{err}"
    );
    // Empty sequence.
    let err = error_of(lstm.forward_dyn(&f32_zeros(&[2, 0, 3]), None));
    assert!(err.contains("empty"), "{err}");
    // Initial states must be [1, B, H].
    let x = f32_zeros(&[2, 5, 3]);
    let (good, bad) = (f32_zeros(&[1, 2, 4]), f32_zeros(&[2, 4]));
    let err = error_of(lstm.forward_dyn(&x, Some((&good, &bad))));
    assert!(err.contains("c0 must be [1, 2, 4]"), "{err}");
    let err = error_of(lstm.forward_dyn(&x, Some((&bad, &good))));
    assert!(err.contains("h0 must be [1, 2, 4]"), "{err}");
    let err = error_of(gru.forward_dyn(&x, Some(&f32_zeros(&[1, 3, 4]))));
    assert!(err.contains("h0 must be [1, 2, 4]"), "{err}");
    // Mismatched parameters through the functional form.
    let w_hh = f32_zeros(&[16, 5]);
    let mut weights = lstm.weights();
    weights.weight_hh = &w_hh;
    let err = error_of(rumus::nn::lstm(&x, weights, None));
    assert!(err.contains("weight_hh must be [16, 4]"), "{err}");
    let b = f32_zeros(&[12]);
    let mut weights = lstm.weights();
    weights.bias_hh = Some(&b);
    let err = error_of(rumus::nn::lstm(&x, weights, None));
    assert!(err.contains("bias_hh must be [16]"), "{err}");
    // A GRU's weights are not an LSTM's.
    let err = error_of(rumus::nn::gru(
        &x,
        Lstm::<3, 3>::new().unwrap().weights(),
        None,
    ));
    assert!(err.contains("weight_hh must be [12, 4]"), "{err}");
}

#[test]
fn attention_rejects_bad_heads_and_shapes() {
    let err = error_of(MultiheadAttention::<6, 4>::new());
    assert!(
        err.contains("divisible") && err.contains("6") && err.contains("4"),
        "{err}"
    );
    let err = error_of(MultiheadAttention::<6, 0>::new());
    assert!(err.contains("divisible"), "{err}");
    let err = error_of(TransformerEncoderBlock::<10, 3, 8>::new());
    assert!(err.contains("divisible"), "{err}");
    let err = error_of(MultiheadAttention::<6, 2>::with_options(1.5, true));
    assert!(err.contains("1.5"), "{err}");

    let mha = MultiheadAttention::<6, 2>::new().unwrap();
    let (q, kv) = (f32_zeros(&[2, 4, 6]), f32_zeros(&[2, 5, 6]));
    let err = error_of(mha.forward_dyn(&f32_zeros(&[2, 4, 5]), &kv, &kv, None, false));
    assert!(err.contains("query must be [batch, length, 6]"), "{err}");
    let err = error_of(mha.forward_dyn(&f32_zeros(&[4, 6]), &kv, &kv, None, false));
    assert!(err.contains("query must be"), "{err}");
    let err = error_of(mha.forward_dyn(&q, &kv, &f32_zeros(&[2, 3, 6]), None, false));
    assert!(err.contains("key and value"), "{err}");
    let err = error_of(mha.forward_dyn(
        &q,
        &f32_zeros(&[3, 5, 6]),
        &f32_zeros(&[3, 5, 6]),
        None,
        false,
    ));
    assert!(err.contains("batch size"), "{err}");
    let mask = DynTensor::from_vec(vec![false; 16], &[4, 4]).unwrap();
    let err = error_of(mha.forward_dyn(&q, &kv, &kv, Some(&mask), false));
    assert!(
        err.contains("attn_mask must be [4, 5] or [4, 4, 5]"),
        "{err}"
    );
    let mask = DynTensor::zeros(&[4, 5], DType::I64).unwrap();
    let err = error_of(mha.forward_dyn(&q, &kv, &kv, Some(&mask), false));
    assert!(err.contains("attn_mask"), "{err}");

    let block = TransformerEncoderBlock::<6, 2, 8>::new().unwrap();
    let err = error_of(block.forward_dyn(&f32_zeros(&[2, 4, 5]), None, false));
    assert!(err.contains("[batch, length, 6]"), "{err}");
}

/// A query that the mask lets see no key, as PyTorch 2.5+ treats it: `need_weights=False`
/// (rumus's `forward_dyn`) attends to nothing, so the output is `out_proj`'s bias;
/// `need_weights=True` (`forward_with_weights`) gives NaN weights and output. The other
/// queries are the same either way.
#[test]
fn a_query_that_sees_no_key() {
    manual_seed(5);
    let mut mha = MultiheadAttention::<4, 2>::new().unwrap();
    let bias = vec![0.5f32, -1.0, 2.0, 0.25];
    let out_bias = DynTensor::from_vec(bias.clone(), &[4]).unwrap();
    mha.out_proj.bias = Some(out_bias.requires_grad_().unwrap());
    let bias: Vec<f64> = bias.into_iter().map(f64::from).collect();
    let x = DynTensor::randn(&[2, 3, 4], DType::F32).unwrap();
    let y = DynTensor::randn(&[2, 5, 4], DType::F32).unwrap();
    // Query 1 sees no key; query 2 sees keys 0 and 3.
    let masked: Vec<bool> = (0..15)
        .map(|i| i / 5 == 1 || (i / 5 == 2 && i % 5 != 0 && i % 5 != 3))
        .collect();
    let mask = DynTensor::from_vec(masked, &[3, 5]).unwrap();
    let out = mha.forward_dyn(&x, &y, &y, Some(&mask), false).unwrap();
    let (with_weights, weights) = mha
        .forward_with_weights(&x, &y, &y, Some(&mask), false)
        .unwrap();
    let (out, with_weights, weights) = (
        out.to_f64_vec(),
        with_weights.to_f64_vec(),
        weights.to_f64_vec(),
    );
    for batch in 0..2 {
        for query in 0..3 {
            let at = (batch * 3 + query) * 4;
            let (a, b) = (&out[at..at + 4], &with_weights[at..at + 4]);
            let row = &weights[(batch * 3 + query) * 5..][..5];
            if query == 1 {
                assert_eq!(a, bias, "batch {batch}: out_proj's bias alone");
                assert!(
                    b.iter().chain(row).all(|v| v.is_nan()),
                    "batch {batch}: {b:?} {row:?}"
                );
            } else {
                assert_eq!(a, b, "batch {batch} query {query}");
                assert!(
                    a.iter().all(|v| v.is_finite()),
                    "batch {batch} query {query}"
                );
            }
        }
    }
    // No gradient comes back through the query that sees nothing.
    let x = x.requires_grad_().unwrap();
    let out = mha.forward_dyn(&x, &y, &y, Some(&mask), false).unwrap();
    let grads = out.tanh().unwrap().sum_all().unwrap().backward().unwrap();
    let dx = grads.grad(&x).unwrap().to_f64_vec();
    assert!(dx.iter().all(|g| g.is_finite()), "{dx:?}");
}

#[test]
fn per_head_masks_and_modes() {
    manual_seed(3);
    let mha = MultiheadAttention::<4, 2>::with_options(0.5, true).unwrap();
    let x = DynTensor::randn(&[2, 3, 4], DType::F32).unwrap();
    // A [B * heads, T, S] mask equal in every slice acts like the [T, S] mask.
    mha.eval();
    let mask = causal_mask(3, 3).unwrap();
    let stacked = DynTensor::stack(&[&mask, &mask, &mask, &mask], 0).unwrap();
    let a = mha.forward_dyn(&x, &x, &x, Some(&mask), false).unwrap();
    let b = mha.forward_dyn(&x, &x, &x, Some(&stacked), false).unwrap();
    let c = mha.forward_dyn(&x, &x, &x, None, true).unwrap();
    assert_eq!(a.to_f64_vec(), b.to_f64_vec());
    assert_eq!(a.to_f64_vec(), c.to_f64_vec());
    // Causal: the first query sees only the first key.
    let (_, weights) = mha.forward_with_weights(&x, &x, &x, None, true).unwrap();
    let w = weights.to_f64_vec();
    assert_eq!(&w[..3], &[1.0, 0.0, 0.0]);
    // Evaluation mode is deterministic; training mode drops attention weights.
    mha.train();
    let (_, dropped) = mha.forward_with_weights(&x, &x, &x, None, false).unwrap();
    mha.eval();
    let (_, kept) = mha.forward_with_weights(&x, &x, &x, None, false).unwrap();
    assert_ne!(dropped.to_f64_vec(), kept.to_f64_vec());
    let rows: Vec<f64> = kept.sum(&[-1], false).unwrap().to_f64_vec();
    assert!(rows.iter().all(|r| (r - 1.0).abs() < 1e-6), "{rows:?}");
}

#[test]
fn summaries_and_parameter_counts() {
    let block = TransformerEncoderBlock::<8, 2, 16>::new().unwrap();
    // PyTorch: 4 * 8 * 8 + 4 * 8 (attention) + 2 * 8 * 16 + 16 + 8 (feed-forward) + 4 * 8.
    assert_eq!(block.num_parameters(), 256 + 32 + 256 + 24 + 32);
    let summary = block.summary("TransformerEncoderBlock");
    assert!(summary.contains("# 288 params"), "{summary}");
    assert!(
        summary.contains("(out_proj): Linear(in_features=8"),
        "{summary}"
    );
    let lstm = Lstm::<3, 4>::without_bias().unwrap();
    assert_eq!(lstm.describe(), "LSTM(3, 4, bias=False, batch_first=True)");
    assert_eq!(lstm.num_parameters(), 16 * 3 + 16 * 4);
    assert_eq!(Gru::<3, 4>::new().unwrap().num_parameters(), 12 * 7 + 24);
}
