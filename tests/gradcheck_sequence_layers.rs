//! Sequence layers against finite differences (first and second order, f64, tiny sizes): the
//! functional LSTM, GRU and multi-head attention, and the transformer encoder block built from
//! f64 parameters.

mod common;

use common::{check_first_and_second_order, randn};
use rumus::nn::{
    AttentionOptions, AttentionWeights, Dropout, FeedForwardActivation, LayerNorm, Linear,
    MultiheadAttention, RnnWeights, TransformerEncoderBlock, gru, lstm, multi_head_attention,
};
use rumus::{DynTensor, Result};

/// Normal values scaled by `scale` (keeps gates away from saturation).
fn scaled(dims: &[usize], seed: u64, scale: f64) -> DynTensor {
    randn(dims, seed).mul_scalar(scale).unwrap()
}

/// Every output flattened and joined, so one check covers all of them.
fn joined(parts: &[&DynTensor]) -> Result<DynTensor> {
    let flat = parts
        .iter()
        .map(|p| p.reshape(&[p.numel()]))
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<&DynTensor> = flat.iter().collect();
    DynTensor::cat(&refs, 0)
}

fn rnn_weights(p: &[DynTensor]) -> RnnWeights<'_> {
    RnnWeights {
        weight_ih: &p[0],
        weight_hh: &p[1],
        bias_ih: p.get(2),
        bias_hh: p.get(3),
    }
}

// B = 2, T = 3, IN = 2, H = 2.
fn rnn_inputs(gates: usize, bias: bool) -> Vec<DynTensor> {
    let mut inputs = vec![
        scaled(&[gates * 2, 2], 1, 0.7),
        scaled(&[gates * 2, 2], 2, 0.7),
    ];
    if bias {
        inputs.push(scaled(&[gates * 2], 3, 0.5));
        inputs.push(scaled(&[gates * 2], 4, 0.5));
    }
    inputs
}

#[test]
fn lstm_without_state() {
    let mut inputs = vec![randn(&[2, 3, 2], 10)];
    inputs.extend(rnn_inputs(4, true));
    check_first_and_second_order(
        "lstm_without_state",
        |x| {
            let (out, (h, c)) = lstm(&x[0], rnn_weights(&x[1..]), None)?;
            joined(&[&out, &h, &c])
        },
        inputs,
    );
}

#[test]
fn lstm_with_state() {
    let mut inputs = vec![
        randn(&[2, 3, 2], 11),
        scaled(&[1, 2, 2], 12, 0.5),
        scaled(&[1, 2, 2], 13, 0.5),
    ];
    inputs.extend(rnn_inputs(4, true));
    check_first_and_second_order(
        "lstm_with_state",
        |x| {
            let (out, (h, c)) = lstm(&x[0], rnn_weights(&x[3..]), Some((&x[1], &x[2])))?;
            joined(&[&out, &h, &c])
        },
        inputs,
    );
}

#[test]
fn lstm_without_bias() {
    let mut inputs = vec![randn(&[1, 4, 2], 14)];
    inputs.extend(rnn_inputs(4, false));
    check_first_and_second_order(
        "lstm_without_bias",
        |x| {
            let (out, (_, c)) = lstm(&x[0], rnn_weights(&x[1..]), None)?;
            joined(&[&out, &c])
        },
        inputs,
    );
}

#[test]
fn gru_without_state() {
    let mut inputs = vec![randn(&[2, 3, 2], 20)];
    inputs.extend(rnn_inputs(3, true));
    check_first_and_second_order(
        "gru_without_state",
        |x| {
            let (out, h) = gru(&x[0], rnn_weights(&x[1..]), None)?;
            joined(&[&out, &h])
        },
        inputs,
    );
}

#[test]
fn gru_with_state() {
    let mut inputs = vec![randn(&[2, 3, 2], 21), scaled(&[1, 2, 2], 22, 0.5)];
    inputs.extend(rnn_inputs(3, true));
    check_first_and_second_order(
        "gru_with_state",
        |x| {
            let (out, h) = gru(&x[0], rnn_weights(&x[2..]), Some(&x[1]))?;
            joined(&[&out, &h])
        },
        inputs,
    );
}

#[test]
fn gru_without_bias() {
    let mut inputs = vec![randn(&[1, 4, 2], 23)];
    inputs.extend(rnn_inputs(3, false));
    check_first_and_second_order(
        "gru_without_bias",
        |x| gru(&x[0], rnn_weights(&x[1..]), None).map(|(out, _)| out),
        inputs,
    );
}

// E = 4, 2 heads, B = 2, T = 3, S = 2 (cross attention).
fn attention_params(seed: u64) -> Vec<DynTensor> {
    vec![
        scaled(&[12, 4], seed, 0.6),
        scaled(&[12], seed + 1, 0.5),
        scaled(&[4, 4], seed + 2, 0.6),
        scaled(&[4], seed + 3, 0.5),
    ]
}

fn attention_weights(p: &[DynTensor]) -> AttentionWeights<'_> {
    AttentionWeights {
        in_proj_weight: &p[0],
        in_proj_bias: Some(&p[1]),
        out_proj_weight: &p[2],
        out_proj_bias: Some(&p[3]),
    }
}

/// The attention output and the per-head weights, joined.
fn attention(
    q: &DynTensor,
    k: &DynTensor,
    v: &DynTensor,
    p: &[DynTensor],
    options: AttentionOptions,
) -> Result<DynTensor> {
    let (out, weights) = multi_head_attention(q, k, v, 2, attention_weights(p), options)?;
    joined(&[&out, &weights])
}

#[test]
fn attention_self_unmasked() {
    let mut inputs = vec![randn(&[2, 3, 4], 30)];
    inputs.extend(attention_params(31));
    check_first_and_second_order(
        "attention_self_unmasked",
        |x| attention(&x[0], &x[0], &x[0], &x[1..], AttentionOptions::default()),
        inputs,
    );
}

#[test]
fn attention_self_causal() {
    let mut inputs = vec![randn(&[2, 3, 4], 40)];
    inputs.extend(attention_params(41));
    let options = AttentionOptions {
        causal: true,
        ..Default::default()
    };
    check_first_and_second_order(
        "attention_self_causal",
        |x| attention(&x[0], &x[0], &x[0], &x[1..], options),
        inputs,
    );
}

#[test]
fn attention_cross_bool_mask() {
    let mask = DynTensor::from_vec(vec![false, true, true, false, false, false], &[3, 2]).unwrap();
    let mut inputs = vec![
        randn(&[2, 3, 4], 50),
        randn(&[2, 2, 4], 51),
        randn(&[2, 2, 4], 52),
    ];
    inputs.extend(attention_params(53));
    let options = AttentionOptions {
        attn_mask: Some(&mask),
        ..Default::default()
    };
    check_first_and_second_order(
        "attention_cross_bool_mask",
        |x| attention(&x[0], &x[1], &x[2], &x[3..], options),
        inputs,
    );
}

#[test]
fn attention_cross_float_mask_without_biases() {
    let inputs = vec![
        randn(&[2, 3, 4], 60),
        randn(&[2, 2, 4], 61),
        randn(&[2, 2, 4], 62),
        randn(&[3, 2], 63),
        scaled(&[12, 4], 64, 0.6),
        scaled(&[4, 4], 65, 0.6),
    ];
    check_first_and_second_order(
        "attention_cross_float_mask_without_biases",
        |x| {
            let weights = AttentionWeights {
                in_proj_weight: &x[4],
                in_proj_bias: None,
                out_proj_weight: &x[5],
                out_proj_bias: None,
            };
            let options = AttentionOptions {
                attn_mask: Some(&x[3]),
                ..Default::default()
            };
            multi_head_attention(&x[0], &x[1], &x[2], 2, weights, options).map(|(out, _)| out)
        },
        inputs,
    );
}

fn linear<const I: usize, const O: usize>(w: &DynTensor, b: &DynTensor) -> Result<Linear<I, O>> {
    Ok(Linear {
        weight: w.clone(),
        bias: Some(b.clone()),
    })
}

fn layer_norm(w: &DynTensor, b: &DynTensor) -> LayerNorm<4> {
    LayerNorm {
        weight: w.clone(),
        bias: b.clone(),
        eps: 1e-5,
    }
}

/// D = 4, 2 heads, FF = 6, from `[in_proj_weight, in_proj_bias, out_proj.weight,
/// out_proj.bias, linear1.weight, linear1.bias, linear2.weight, linear2.bias, norm1.weight,
/// norm1.bias, norm2.weight, norm2.bias]`.
fn encoder_block(
    p: &[DynTensor],
    activation: FeedForwardActivation,
) -> Result<TransformerEncoderBlock<4, 2, 6>> {
    Ok(TransformerEncoderBlock {
        self_attn: MultiheadAttention::from_parameters(
            p[0].clone(),
            Some(p[1].clone()),
            linear(&p[2], &p[3])?,
            0.0,
        )?,
        linear1: linear(&p[4], &p[5])?,
        dropout: Dropout::new(0.0)?,
        linear2: linear(&p[6], &p[7])?,
        norm1: layer_norm(&p[8], &p[9]),
        norm2: layer_norm(&p[10], &p[11]),
        dropout1: Dropout::new(0.0)?,
        dropout2: Dropout::new(0.0)?,
        activation,
    })
}

fn encoder_inputs(seed: u64) -> Vec<DynTensor> {
    let mut inputs = vec![randn(&[2, 3, 4], seed)];
    inputs.extend(attention_params(seed + 1));
    inputs.extend([
        scaled(&[6, 4], seed + 10, 0.6),
        scaled(&[6], seed + 11, 0.5),
        scaled(&[4, 6], seed + 12, 0.6),
        scaled(&[4], seed + 13, 0.5),
        scaled(&[4], seed + 14, 0.2).add_scalar(1.0).unwrap(),
        scaled(&[4], seed + 15, 0.2),
        scaled(&[4], seed + 16, 0.2).add_scalar(1.0).unwrap(),
        scaled(&[4], seed + 17, 0.2),
    ]);
    inputs
}

#[test]
fn encoder_block_relu() {
    check_first_and_second_order(
        "encoder_block_relu",
        |x| encoder_block(&x[1..], FeedForwardActivation::Relu)?.forward_dyn(&x[0], None, false),
        encoder_inputs(70),
    );
}

#[test]
fn encoder_block_gelu_causal() {
    check_first_and_second_order(
        "encoder_block_gelu_causal",
        |x| encoder_block(&x[1..], FeedForwardActivation::Gelu)?.forward_dyn(&x[0], None, true),
        encoder_inputs(80),
    );
}
