//! ONNX `LSTM` and `GRU` as PyTorch exports `nn.LSTM` and `nn.GRU` (one node per layer,
//! `layout` 0, the default activations, GRU with `linear_before_reset` = 1): the input
//! projection of every time step is one product, then each direction loops over the steps
//! with ONNX's gate orders (LSTM `i o f c`, GRU `z r h`). Outputs `Y` `[T, D, B, H]`, `Y_h`
//! and (LSTM) `Y_c` `[D, B, H]`.

use super::import_ops::{Attributes, arg, invalid};
use super::limits::Limits;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::DynTensor;

/// Which recurrence a node runs.
#[derive(Clone, Copy, PartialEq)]
enum Cell {
    Lstm,
    Gru,
}

impl Cell {
    fn of(op: &str) -> Cell {
        if op == "LSTM" { Cell::Lstm } else { Cell::Gru }
    }

    /// Gates stacked in the weights: LSTM 4, GRU 3.
    fn gates(self) -> usize {
        match self {
            Cell::Lstm => 4,
            Cell::Gru => 3,
        }
    }

    /// The activations ONNX lists for one direction by default.
    fn default_activations(self) -> &'static [&'static [u8]] {
        match self {
            Cell::Lstm => &[b"Sigmoid", b"Tanh", b"Tanh"],
            Cell::Gru => &[b"Sigmoid", b"Tanh"],
        }
    }
}

/// The attributes rumus runs, checked when the file is loaded: whatever else a node asks
/// for is an error naming it there.
pub(super) fn check(op: &str, a: &Attributes<'_>) -> Result<()> {
    let cell = Cell::of(op);
    let hidden = a.checked_int("hidden_size", 0)?;
    if hidden <= 0 {
        return Err(invalid(format!(
            "{op} needs a positive hidden_size attribute, got {hidden}"
        )));
    }
    directions(a)?;
    if a.checked_int("layout", 0)? != 0 {
        return Err(invalid(format!(
            "{op} with layout=1 (batch first) is not supported; PyTorch exports layout 0"
        )));
    }
    if a.get("clip").is_some() {
        return Err(invalid(format!("{op} with clip is not supported")));
    }
    if a.checked_int("input_forget", 0)? != 0 {
        return Err(invalid(format!(
            "{op} with input_forget=1 is not supported"
        )));
    }
    if cell == Cell::Gru && a.checked_int("linear_before_reset", 0)? != 1 {
        return Err(invalid(
            "GRU with linear_before_reset=0 is not supported; PyTorch's nn.GRU exports 1",
        ));
    }
    if a.get("activations").is_some() {
        let defaults: Vec<String> = cell
            .default_activations()
            .iter()
            .map(|n| String::from_utf8_lossy(n).into_owned())
            .collect();
        return Err(invalid(format!(
            "{op} with an activations attribute is not supported; rumus runs the default \
             activations ({}), which PyTorch exports by leaving the attribute out",
            defaults.join(", ")
        )));
    }
    Ok(())
}

/// Each direction the node runs: `true` where it runs backwards in time.
fn directions(a: &Attributes<'_>) -> Result<Vec<bool>> {
    match a.get("direction") {
        None => Ok(vec![false]),
        Some(super::decode::AttributeValue::String(s)) => match s.as_slice() {
            b"forward" => Ok(vec![false]),
            b"reverse" => Ok(vec![true]),
            b"bidirectional" => Ok(vec![false, true]),
            other => Err(invalid(format!(
                "direction {:?} is not one of forward, reverse, bidirectional",
                String::from_utf8_lossy(other)
            ))),
        },
        Some(_) => Err(invalid("attribute direction is not a string")),
    }
}

/// Runs an `LSTM` or `GRU` node.
pub(super) fn run(
    op: &str,
    a: &Attributes<'_>,
    args: &[Option<&DynTensor>],
    limits: &Limits,
) -> Result<Vec<DynTensor>> {
    check(op, a)?;
    let cell = Cell::of(op);
    let hidden = a.checked_int("hidden_size", 0)? as usize;
    let reverse = directions(a)?;
    let (x, w, r) = (arg(args, 0)?, arg(args, 1)?, arg(args, 2)?);
    if args.get(7).copied().flatten().is_some() {
        return Err(invalid(
            "LSTM with peephole weights (input P) is not supported",
        ));
    }
    let &[steps, batch, features] = x.dims() else {
        return Err(invalid(format!(
            "{op} input X must be [T, B, I], got {:?}",
            x.dims()
        )));
    };
    let gated = cell.gates() * hidden;
    let d = reverse.len();
    let expect = |name: &str, t: &DynTensor, dims: &[usize]| {
        if t.dims() == dims {
            Ok(())
        } else {
            Err(invalid(format!(
                "{op} input {name} must be {dims:?} (directions, gates x hidden_size, ..), \
                 got {:?}",
                t.dims()
            )))
        }
    };
    expect("W", w, &[d, gated, features])?;
    expect("R", r, &[d, gated, hidden])?;
    let bias = args.get(3).copied().flatten();
    if let Some(b) = bias {
        expect("B", b, &[d, 2 * gated])?;
    }
    if let Some(lengths) = args.get(4).copied().flatten() {
        let all_full = lengths.dtype() != DType::Bool
            && lengths.to_f64_vec().iter().all(|&l| l == steps as f64);
        if !all_full {
            return Err(invalid(format!(
                "{op} with sequence_lens shorter than the {steps} steps is not supported"
            )));
        }
    }
    let initial = |k: usize, name: &str| -> Result<Option<&DynTensor>> {
        let t = args.get(k).copied().flatten();
        if let Some(t) = t {
            expect(name, t, &[d, batch, hidden])?;
        }
        Ok(t)
    };
    let (initial_h, initial_c) = (initial(5, "initial_h")?, initial(6, "initial_c")?);
    let work = (steps * batch * gated * (features + hidden) * d) as u64;
    limits.check_work(op, work).map_err(invalid)?;
    if steps == 0 {
        return Err(invalid(format!("{op} over an empty sequence (T = 0)")));
    }

    let (mut ys, mut finals_h, mut finals_c) = (Vec::new(), Vec::new(), Vec::new());
    for (k, &backwards) in reverse.iter().enumerate() {
        let direction = |t: &DynTensor, rows: &[usize]| t.narrow(0, k, 1)?.reshape(rows);
        let zeros = || DynTensor::zeros(&[gated], x.dtype());
        let (wb, rb) = match bias {
            Some(b) => {
                let b = direction(b, &[2 * gated])?;
                (b.narrow(0, 0, gated)?, b.narrow(0, gated, gated)?)
            }
            None => (zeros()?, zeros()?),
        };
        let w_t = direction(w, &[gated, features])?.transpose(0, 1)?;
        let r_t = direction(r, &[gated, hidden])?.transpose(0, 1)?;
        // Every step's input projection in one product: [T, B, G * H].
        let projected = x.matmul(&w_t)?.add(&wb)?;
        let start = |t: Option<&DynTensor>| match t {
            Some(t) => direction(t, &[batch, hidden]),
            None => DynTensor::zeros(&[batch, hidden], x.dtype()),
        };
        let (mut h, mut c) = (start(initial_h)?, start(initial_c)?);
        let mut outputs: Vec<Option<DynTensor>> = vec![None; steps];
        let order: Vec<usize> = if backwards {
            (0..steps).rev().collect()
        } else {
            (0..steps).collect()
        };
        for t in order {
            let xt = projected.narrow(0, t, 1)?.reshape(&[batch, gated])?;
            let ht = h.matmul(&r_t)?.add(&rb)?;
            let gate = |from: &DynTensor, g: usize| from.narrow(1, g * hidden, hidden);
            match cell {
                Cell::Lstm => {
                    let sum = xt.add(&ht)?;
                    let input = gate(&sum, 0)?.sigmoid()?;
                    let output = gate(&sum, 1)?.sigmoid()?;
                    let forget = gate(&sum, 2)?.sigmoid()?;
                    let candidate = gate(&sum, 3)?.tanh()?;
                    c = forget.mul(&c)?.add(&input.mul(&candidate)?)?;
                    h = output.mul(&c.tanh()?)?;
                }
                Cell::Gru => {
                    let update = gate(&xt, 0)?.add(&gate(&ht, 0)?)?.sigmoid()?;
                    let reset = gate(&xt, 1)?.add(&gate(&ht, 1)?)?.sigmoid()?;
                    // linear_before_reset: the reset gate scales `h R_h + Rb_h`.
                    let candidate = gate(&xt, 2)?.add(&reset.mul(&gate(&ht, 2)?)?)?.tanh()?;
                    // (1 - z) h~ + z h
                    h = candidate.add(&update.mul(&h.sub(&candidate)?)?)?;
                }
            }
            outputs[t] = Some(h.unsqueeze(0)?);
        }
        let outputs: Vec<DynTensor> = outputs.into_iter().flatten().collect();
        ys.push(DynTensor::cat(&outputs.iter().collect::<Vec<_>>(), 0)?.unsqueeze(1)?);
        finals_h.push(h.unsqueeze(0)?);
        finals_c.push(c.unsqueeze(0)?);
    }
    let join = |parts: &[DynTensor], axis| DynTensor::cat(&parts.iter().collect::<Vec<_>>(), axis);
    let mut results = vec![join(&ys, 1)?, join(&finals_h, 0)?];
    if cell == Cell::Lstm {
        results.push(join(&finals_c, 0)?);
    }
    Ok(results)
}
