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

/// The four parameters of a layer with `gates` gates, drawn in PyTorch's order.
type RecurrentParams = (DynTensor, DynTensor, Option<DynTensor>, Option<DynTensor>);

fn recurrent_params(
    gates: usize,
    input: usize,
    hidden: usize,
    bias: bool,
) -> Result<RecurrentParams> {
    if hidden == 0 {
        return Err(invalid(
            "recurrent layer",
            "the hidden size must be positive (PyTorch refuses hidden_size=0 too)".into(),
        ));
    }
    let weight_ih = uniform_param(&[gates * hidden, input], hidden)?;
    let weight_hh = uniform_param(&[gates * hidden, hidden], hidden)?;
    let (bias_ih, bias_hh) = if bias {
        (
            Some(uniform_param(&[gates * hidden], hidden)?),
            Some(uniform_param(&[gates * hidden], hidden)?),
        )
    } else {
        (None, None)
    };
    Ok((weight_ih, weight_hh, bias_ih, bias_hh))
}

fn visit_recurrent(
    prefix: &str,
    f: &mut dyn FnMut(&str, &DynTensor),
    weight_ih: &DynTensor,
    weight_hh: &DynTensor,
    bias_ih: Option<&DynTensor>,
    bias_hh: Option<&DynTensor>,
) {
    f(&format!("{prefix}weight_ih_l0"), weight_ih);
    f(&format!("{prefix}weight_hh_l0"), weight_hh);
    if let Some(b) = bias_ih {
        f(&format!("{prefix}bias_ih_l0"), b);
    }
    if let Some(b) = bias_hh {
        f(&format!("{prefix}bias_hh_l0"), b);
    }
}

/// `Lstm<IN, HIDDEN>`: `[B, T, IN] -> [B, T, HIDDEN]` plus the final `(h, c)`; see [`lstm`].
/// Parameters as PyTorch names them: `weight_ih_l0` `[4H, IN]`, `weight_hh_l0` `[4H, H]`,
/// `bias_ih_l0` and `bias_hh_l0` `[4H]`, the rows in gate order `i, f, g, o`.
pub struct Lstm<const IN: usize, const HIDDEN: usize> {
    /// Input-to-hidden weights of the 4 gates stacked along the rows, `[4H, IN]`.
    pub weight_ih_l0: DynTensor,
    /// Hidden-to-hidden weights of the 4 gates stacked along the rows, `[4H, H]`.
    pub weight_hh_l0: DynTensor,
    /// Input-to-hidden bias, `[4H]`; absent without biases.
    pub bias_ih_l0: Option<DynTensor>,
    /// Hidden-to-hidden bias, `[4H]`; absent without biases.
    pub bias_hh_l0: Option<DynTensor>,
}

impl<const IN: usize, const HIDDEN: usize> Lstm<IN, HIDDEN> {
    /// Every parameter drawn from U(-1/sqrt(HIDDEN), 1/sqrt(HIDDEN)) with the global
    /// generator, as PyTorch initialises them.
    pub fn new() -> Result<Self> {
        Self::build(true)
    }

    /// A layer without the two bias vectors (PyTorch's `bias=False`).
    pub fn without_bias() -> Result<Self> {
        Self::build(false)
    }

    fn build(bias: bool) -> Result<Self> {
        let (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0) =
            recurrent_params(4, IN, HIDDEN, bias)?;
        Ok(Lstm {
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

impl<const IN: usize, const HIDDEN: usize> Module for Lstm<IN, HIDDEN> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        visit_recurrent(
            prefix,
            f,
            &self.weight_ih_l0,
            &self.weight_hh_l0,
            self.bias_ih_l0.as_ref(),
            self.bias_hh_l0.as_ref(),
        );
    }

    fn describe(&self) -> String {
        let bias = if self.bias_ih_l0.is_some() {
            ""
        } else {
            ", bias=False"
        };
        format!("LSTM({IN}, {HIDDEN}{bias}, batch_first=True)")
    }
}

/// `Gru<IN, HIDDEN>`: `[B, T, IN] -> [B, T, HIDDEN]` plus the final `h`; see [`gru`].
/// Parameters as PyTorch names them: `weight_ih_l0` `[3H, IN]`, `weight_hh_l0` `[3H, H]`,
/// `bias_ih_l0` and `bias_hh_l0` `[3H]`, the rows in gate order `r, z, n`.
pub struct Gru<const IN: usize, const HIDDEN: usize> {
    /// Input-to-hidden weights of the 3 gates stacked along the rows, `[3H, IN]`.
    pub weight_ih_l0: DynTensor,
    /// Hidden-to-hidden weights of the 3 gates stacked along the rows, `[3H, H]`.
    pub weight_hh_l0: DynTensor,
    /// Input-to-hidden bias, `[3H]`; absent without biases.
    pub bias_ih_l0: Option<DynTensor>,
    /// Hidden-to-hidden bias, `[3H]`; absent without biases.
    pub bias_hh_l0: Option<DynTensor>,
}

impl<const IN: usize, const HIDDEN: usize> Gru<IN, HIDDEN> {
    /// Every parameter drawn from U(-1/sqrt(HIDDEN), 1/sqrt(HIDDEN)) with the global
    /// generator, as PyTorch initialises them.
    pub fn new() -> Result<Self> {
        Self::build(true)
    }

    /// A layer without the two bias vectors (PyTorch's `bias=False`).
    pub fn without_bias() -> Result<Self> {
        Self::build(false)
    }

    fn build(bias: bool) -> Result<Self> {
        let (weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0) =
            recurrent_params(3, IN, HIDDEN, bias)?;
        Ok(Gru {
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

impl<const IN: usize, const HIDDEN: usize> Module for Gru<IN, HIDDEN> {
    fn visit(&self, prefix: &str, f: &mut dyn FnMut(&str, &DynTensor)) {
        visit_recurrent(
            prefix,
            f,
            &self.weight_ih_l0,
            &self.weight_hh_l0,
            self.bias_ih_l0.as_ref(),
            self.bias_hh_l0.as_ref(),
        );
    }

    fn describe(&self) -> String {
        let bias = if self.bias_ih_l0.is_some() {
            ""
        } else {
            ", bias=False"
        };
        format!("GRU({IN}, {HIDDEN}{bias}, batch_first=True)")
    }
}
