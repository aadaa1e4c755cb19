//! Recurrent layers: LSTM and GRU (one layer, one direction, batch first), with PyTorch's
//! parameter layout, gate order and names, so `torch.nn.LSTM` / `torch.nn.GRU` weights load by
//! name.
//!
//! Both are composites of differentiable ops: the input projection of every time step is one
//! matrix product, then a loop over time applies the recurrent product and the gates. Gradients
//! of any order come from the tape.

use super::module::Module;
use crate::dtype::DType;
use crate::error::{Result, ShapeError};
use crate::tensor::DynTensor;

/// The parameters of one recurrent layer in PyTorch's layout: the gates' weights stacked along
/// the rows, `weight_ih` `[GATES * H, IN]`, `weight_hh` `[GATES * H, H]`, biases `[GATES * H]`.
#[derive(Debug, Clone, Copy)]
pub struct RnnWeights<'a> {
    /// Input-to-hidden weights, `[GATES * H, IN]`.
    pub weight_ih: &'a DynTensor,
    /// Hidden-to-hidden weights, `[GATES * H, H]`.
    pub weight_hh: &'a DynTensor,
    /// Input-to-hidden bias, `[GATES * H]`, if any.
    pub bias_ih: Option<&'a DynTensor>,
    /// Hidden-to-hidden bias, `[GATES * H]`, if any.
    pub bias_hh: Option<&'a DynTensor>,
}

fn invalid(op: &str, message: String) -> crate::Error {
    ShapeError::Invalid {
        context: op.into(),
        message,
    }
    .into()
}

/// Checks every shape of a recurrent layer with `gates` gates and returns `(batch, steps,
/// hidden)`.
fn check_shapes(
    op: &str,
    x: &DynTensor,
    w: &RnnWeights,
    gates: usize,
) -> Result<(usize, usize, usize)> {
    let wi = w.weight_ih.dims();
    // A hidden size of 0 has no gates to split (PyTorch refuses `hidden_size=0` too).
    if wi.len() != 2 || wi[0] == 0 || !wi[0].is_multiple_of(gates) {
        return Err(invalid(
            op,
            format!("weight_ih must be [{gates} * hidden, input] with hidden > 0, got {wi:?}"),
        ));
    }
    let (hidden, input) = (wi[0] / gates, wi[1]);
    if x.rank() != 3 || x.dims()[2] != input {
        return Err(invalid(
            op,
            format!(
                "input must be [batch, time, {input}] (batch first), got {:?}",
                x.dims()
            ),
        ));
    }
    if x.dims()[1] == 0 {
        return Err(invalid(
            op,
            format!("the sequence is empty (input {:?})", x.dims()),
        ));
    }
    if w.weight_hh.dims() != [gates * hidden, hidden] {
        return Err(invalid(
            op,
            format!(
                "weight_hh must be [{}, {hidden}], got {:?}",
                gates * hidden,
                w.weight_hh.dims()
            ),
        ));
    }
    for (name, bias) in [("bias_ih", w.bias_ih), ("bias_hh", w.bias_hh)] {
        if let Some(b) = bias.filter(|b| b.dims() != [gates * hidden]) {
            return Err(invalid(
                op,
                format!("{name} must be [{}], got {:?}", gates * hidden, b.dims()),
            ));
        }
    }
    Ok((x.dims()[0], x.dims()[1], hidden))
}

/// An initial state `[1, batch, hidden]` (PyTorch's `[num_layers, batch, hidden]`) as
/// `[batch, hidden]`, or zeros.
fn initial_state(
    op: &str,
    name: &str,
    state: Option<&DynTensor>,
    batch: usize,
    hidden: usize,
    dtype: DType,
    device: &crate::Device,
) -> Result<DynTensor> {
    match state {
        None => DynTensor::zeros_on(&[batch, hidden], dtype, device),
        Some(s) if s.dims() == [1, batch, hidden] => s.reshape(&[batch, hidden]),
        Some(s) => Err(invalid(
            op,
            format!(
                "{name} must be [1, {batch}, {hidden}] ([num_layers, batch, hidden]), got {:?}",
                s.dims()
            ),
        )),
    }
}

/// The input projections of every time step, one `[batch, GATES * H]` tensor per step.
fn input_projections(x: &DynTensor, w: &RnnWeights) -> Result<Vec<DynTensor>> {
    let mut steps = Vec::with_capacity(x.dims()[1]);
    split_steps(&x.linear(w.weight_ih, w.bias_ih)?, &mut steps)?;
    Ok(steps)
}

/// Appends the steps of `[batch, T, F]` (as `[batch, F]` tensors) to `out`, by halving the
/// time axis recursively. The gradient of a `narrow` is the slice padded with zeros to the
/// size of what was narrowed; taking each step straight from the whole tensor would make the
/// backward pass O(T^2) in time; halving keeps it O(T log T).
fn split_steps(x: &DynTensor, out: &mut Vec<DynTensor>) -> Result<()> {
    let steps = x.dims()[1];
    if steps == 1 {
        out.push(x.squeeze(1)?);
        return Ok(());
    }
    let half = steps / 2;
    split_steps(&x.narrow(1, 0, half)?, out)?;
    split_steps(&x.narrow(1, half, steps - half)?, out)
}

/// A single-layer, unidirectional, batch-first LSTM (PyTorch's `torch.nn.LSTM` with
/// `batch_first=True`): `x` `[B, T, IN]`, optional initial `(h0, c0)`, each `[1, B, H]`.
/// Returns the hidden state of every step `[B, T, H]` and the final `(h_n, c_n)`, each
/// `[1, B, H]`.
///
/// Gates in PyTorch's order `i, f, g, o`:
/// `i = σ(W_ii x + b_ii + W_hi h + b_hi)`, `f = σ(..)`, `g = tanh(..)`, `o = σ(..)`,
/// `c' = f ⊙ c + i ⊙ g`, `h' = o ⊙ tanh(c')`.
pub fn lstm(
    x: &DynTensor,
    weights: RnnWeights,
    state: Option<(&DynTensor, &DynTensor)>,
) -> Result<(DynTensor, (DynTensor, DynTensor))> {
    let (batch, steps, hidden) = check_shapes("lstm", x, &weights, 4)?;
    let mut h = initial_state(
        "lstm",
        "h0",
        state.map(|s| s.0),
        batch,
        hidden,
        x.dtype(),
        &x.device(),
    )?;
    let mut c = initial_state(
        "lstm",
        "c0",
        state.map(|s| s.1),
        batch,
        hidden,
        x.dtype(),
        &x.device(),
    )?;
    let w_hh = weights.weight_hh.transpose(0, 1)?;
    let mut outputs = Vec::with_capacity(steps);
    for projected in input_projections(x, &weights)? {
        let mut recurrent = h.matmul(&w_hh)?;
        if let Some(b) = weights.bias_hh {
            recurrent = recurrent.add(b)?;
        }
        let gates = recurrent.add(&projected)?.chunk(4, -1)?;
        let i = gates[0].sigmoid()?;
        let f = gates[1].sigmoid()?;
        let g = gates[2].tanh()?;
        let o = gates[3].sigmoid()?;
        c = f.mul(&c)?.add(&i.mul(&g)?)?;
        h = o.mul(&c.tanh()?)?;
        outputs.push(h.clone());
    }
    let refs: Vec<&DynTensor> = outputs.iter().collect();
    Ok((
        DynTensor::stack(&refs, 1)?,
        (h.unsqueeze(0)?, c.unsqueeze(0)?),
    ))
}

/// A single-layer, unidirectional, batch-first GRU (PyTorch's `torch.nn.GRU` with
/// `batch_first=True`): `x` `[B, T, IN]`, optional initial `h0` `[1, B, H]`. Returns the
/// hidden state of every step `[B, T, H]` and the final `h_n` `[1, B, H]`.
///
/// Gates in PyTorch's order `r, z, n`, the reset gate applied to the recurrent term with its
/// bias: `r = σ(W_ir x + b_ir + W_hr h + b_hr)`, `z = σ(..)`,
/// `n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))`, `h' = (1 - z) ⊙ n + z ⊙ h`.
pub fn gru(
    x: &DynTensor,
    weights: RnnWeights,
    h0: Option<&DynTensor>,
) -> Result<(DynTensor, DynTensor)> {
    let (batch, steps, hidden) = check_shapes("gru", x, &weights, 3)?;
    let mut h = initial_state("gru", "h0", h0, batch, hidden, x.dtype(), &x.device())?;
    let w_hh = weights.weight_hh.transpose(0, 1)?;
    let mut outputs = Vec::with_capacity(steps);
    for projected in input_projections(x, &weights)? {
        let mut recurrent = h.matmul(&w_hh)?;
        if let Some(b) = weights.bias_hh {
            recurrent = recurrent.add(b)?;
        }
        let gi = projected.chunk(3, -1)?;
        let gh = recurrent.chunk(3, -1)?;
        let r = gh[0].add(&gi[0])?.sigmoid()?;
        let z = gh[1].add(&gi[1])?.sigmoid()?;
        let n = gi[2].add(&gh[2].mul(&r)?)?.tanh()?;
        // (1 - z) n + z h, written as PyTorch evaluates it.
        h = h.sub(&n)?.mul(&z)?.add(&n)?;
        outputs.push(h.clone());
    }
    let refs: Vec<&DynTensor> = outputs.iter().collect();
    Ok((DynTensor::stack(&refs, 1)?, h.unsqueeze(0)?))
}

/// `[rows, cols]` drawn from U(-1/sqrt(hidden), 1/sqrt(hidden)) and tracked.
fn uniform_param(dims: &[usize], hidden: usize) -> Result<DynTensor> {
    let bound = super::init::fan_in_bound(hidden);
    DynTensor::uniform(dims, -bound, bound, DType::F32)?.requires_grad_()
}

/// One recurrent layer type: the struct with PyTorch's parameter names, its constructors,
/// [`RnnWeights`] view and [`Module`] impl. LSTM and GRU differ only in their gate count,
/// gate order and PyTorch name here; each writes its own `forward_dyn`, whose state differs.
macro_rules! recurrent_layer {
    ($layer:ident, $gates:literal, $order:literal, $torch:literal, $function:literal) => {
        #[doc = concat!("`", stringify!($layer), "<IN, HIDDEN>`: `[B, T, IN] -> [B, T, HIDDEN]` ")]
        #[doc = concat!("plus the final state; see [`", $function, "`].")]
        #[doc = concat!("Parameters as PyTorch names them: `weight_ih_l0` `[", $gates, "H, IN]`, ")]
        #[doc = concat!("`weight_hh_l0` `[", $gates, "H, H]`, `bias_ih_l0` and `bias_hh_l0` `[")]
        #[doc = concat!($gates, "H]`, the rows in gate order ", $order, ".")]
        pub struct $layer<const IN: usize, const HIDDEN: usize> {
            #[doc = concat!("Input-to-hidden weights of the ", $gates, " gates stacked along ")]
            #[doc = concat!("the rows, `[", $gates, "H, IN]`.")]
            pub weight_ih_l0: DynTensor,
            #[doc = concat!("Hidden-to-hidden weights of the ", $gates, " gates stacked along ")]
            #[doc = concat!("the rows, `[", $gates, "H, H]`.")]
            pub weight_hh_l0: DynTensor,
            #[doc = concat!("Input-to-hidden bias, `[", $gates, "H]`; absent without biases.")]
            pub bias_ih_l0: Option<DynTensor>,
            #[doc = concat!("Hidden-to-hidden bias, `[", $gates, "H]`; absent without biases.")]
            pub bias_hh_l0: Option<DynTensor>,
        }

        impl<const IN: usize, const HIDDEN: usize> $layer<IN, HIDDEN> {
            /// Every parameter drawn from U(-1/sqrt(HIDDEN), 1/sqrt(HIDDEN)) with the global
            /// generator, as PyTorch initialises them.
            pub fn new() -> Result<Self> {
                Self::build(true)
            }

            /// A layer without the two bias vectors (PyTorch's `bias=False`).
            pub fn without_bias() -> Result<Self> {
                Self::build(false)
            }

            /// The parameters drawn in PyTorch's order.
            fn build(bias: bool) -> Result<Self> {
                if HIDDEN == 0 {
                    return Err(invalid(
                        "recurrent layer",
                        "the hidden size must be positive (PyTorch refuses hidden_size=0 too)"
                            .into(),
                    ));
                }
                let rows = $gates * HIDDEN;
                let weight_ih_l0 = uniform_param(&[rows, IN], HIDDEN)?;
                let weight_hh_l0 = uniform_param(&[rows, HIDDEN], HIDDEN)?;
                let (bias_ih_l0, bias_hh_l0) = if bias {
                    (
                        Some(uniform_param(&[rows], HIDDEN)?),
                        Some(uniform_param(&[rows], HIDDEN)?),
                    )
                } else {
                    (None, None)
                };
                Ok($layer {
                    weight_ih_l0,
                    weight_hh_l0,
                    bias_ih_l0,
                    bias_hh_l0,
                })
            }

            /// The parameters as the functional form takes them.
            pub fn weights(&self) -> RnnWeights<'_> {
                RnnWeights {
                    weight_ih: &self.weight_ih_l0,
                    weight_hh: &self.weight_hh_l0,
                    bias_ih: self.bias_ih_l0.as_ref(),
                    bias_hh: self.bias_hh_l0.as_ref(),
                }
            }
        }

        impl<const IN: usize, const HIDDEN: usize> Module for $layer<IN, HIDDEN> {
            fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
                f(&format!("{prefix}weight_ih_l0"), &self.weight_ih_l0);
                f(&format!("{prefix}weight_hh_l0"), &self.weight_hh_l0);
                if let Some(b) = &self.bias_ih_l0 {
                    f(&format!("{prefix}bias_ih_l0"), b);
                }
                if let Some(b) = &self.bias_hh_l0 {
                    f(&format!("{prefix}bias_hh_l0"), b);
                }
            }

            fn describe(&self) -> String {
                let bias = if self.bias_ih_l0.is_some() {
                    ""
                } else {
                    ", bias=False"
                };
                format!(
                    concat!($torch, "({}, {}{}, batch_first=True)"),
                    IN, HIDDEN, bias
                )
            }
        }
    };
}

recurrent_layer!(Lstm, 4, "`i, f, g, o`", "LSTM", "lstm");
recurrent_layer!(Gru, 3, "`r, z, n`", "GRU", "gru");

impl<const IN: usize, const HIDDEN: usize> Lstm<IN, HIDDEN> {
    /// `x` `[B, T, IN]`, optional `(h0, c0)` each `[1, B, HIDDEN]` (zeros when absent) ->
    /// `(output [B, T, HIDDEN], (h_n, c_n))`, like PyTorch's `output, (h_n, c_n) = lstm(x)`.
    pub fn forward_dyn(
        &self,
        x: &DynTensor,
        state: Option<(&DynTensor, &DynTensor)>,
    ) -> Result<(DynTensor, (DynTensor, DynTensor))> {
        lstm(x, self.weights(), state)
    }
}

impl<const IN: usize, const HIDDEN: usize> Gru<IN, HIDDEN> {
    /// `x` `[B, T, IN]`, optional `h0` `[1, B, HIDDEN]` (zeros when absent) ->
    /// `(output [B, T, HIDDEN], h_n [1, B, HIDDEN])`, like PyTorch's `output, h_n = gru(x)`.
    pub fn forward_dyn(
        &self,
        x: &DynTensor,
        h0: Option<&DynTensor>,
    ) -> Result<(DynTensor, DynTensor)> {
        gru(x, self.weights(), h0)
    }
}
