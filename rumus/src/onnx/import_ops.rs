//! What each imported ONNX op computes, in rumus's ops (opset 13 and later semantics). The
//! small integer tensors of shape arithmetic (`Shape`, `Gather`, `Concat`, `Unsqueeze` on
//! dims, as PyTorch's exporter writes for a `view`) are computed on the host.

use super::decode::{AttributeValue, NodeProto};
use super::import::tensor_of;
use super::import_einsum as einsum;
use super::import_gather_ops as gather_ops;
use super::import_logic_ops as logic_ops;
use super::import_norm_ops as norm_ops;
use super::import_recurrent_ops as recurrent_ops;
use super::import_scatter_ops as scatter_ops;
use super::import_tensor_ops as tensor_ops;
use super::import_window_ops as window_ops;
use super::limits::{self, Limits};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::DynTensor;

/// The ONNX ops the importer runs.
pub const SUPPORTED: &[&str] = &[
    "Abs",
    "Add",
    "And",
    "ArgMax",
    "AveragePool",
    "BatchNormalization",
    "Cast",
    "Clip",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Conv",
    "ConvTranspose",
    "Cos",
    "CumSum",
    "Div",
    "Dropout",
    "Einsum",
    "Elu",
    "Equal",
    "Erf",
    "Exp",
    "Expand",
    "Flatten",
    "Floor",
    "Gather",
    "GatherElements",
    "GatherND",
    "Gelu",
    "Gemm",
    "GlobalAveragePool",
    "GRU",
    "Greater",
    "GreaterOrEqual",
    "HardSigmoid",
    "HardSwish",
    "Identity",
    "InstanceNormalization",
    "IsInf",
    "IsNaN",
    "LSTM",
    "LayerNormalization",
    "LeakyRelu",
    "Less",
    "LessOrEqual",
    "Log",
    "LogSoftmax",
    "MatMul",
    "Max",
    "MaxPool",
    "Min",
    "Mod",
    "Mul",
    "Neg",
    "Not",
    "Or",
    "Pow",
    "Range",
    "Reciprocal",
    "ReduceMax",
    "ReduceMean",
    "ReduceMin",
    "ReduceProd",
    "ReduceSum",
    "Relu",
    "Reshape",
    "Resize",
    "ScatterElements",
    "ScatterND",
    "Shape",
    "Sigmoid",
    "Sign",
    "Sin",
    "Slice",
    "Softmax",
    "Softplus",
    "Split",
    "Sqrt",
    "Squeeze",
    "Sub",
    "Tanh",
    "Tile",
    "Transpose",
    "Trilu",
    "Unsqueeze",
    "Where",
    "Xor",
];

pub(super) fn invalid(message: impl Into<String>) -> Error {
    Error::InvalidArgument {
        op: "onnx import",
        message: message.into(),
    }
}

/// Attribute lookups with ONNX's defaults.
pub(super) struct Attributes<'a>(pub(super) &'a NodeProto);

impl Attributes<'_> {
    pub(super) fn get(&self, name: &str) -> Option<&AttributeValue> {
        self.0
            .attributes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v)
    }

    fn int(&self, name: &str, default: i64) -> i64 {
        match self.get(name) {
            Some(AttributeValue::Int(v)) => *v,
            _ => default,
        }
    }

    /// An integer attribute, `default` when absent; one of another type is an error naming
    /// it.
    pub(super) fn checked_int(&self, name: &str, default: i64) -> Result<i64> {
        match self.get(name) {
            None => Ok(default),
            Some(AttributeValue::Int(v)) => Ok(*v),
            Some(_) => Err(invalid(format!(
                "attribute {name} is not an integer (ONNX defines it as one)"
            ))),
        }
    }

    fn float(&self, name: &str, default: f32) -> f32 {
        match self.get(name) {
            Some(AttributeValue::Float(v)) => *v,
            _ => default,
        }
    }

    /// A string attribute (its bytes read as UTF-8, lossily), `None` when absent or of
    /// another type.
    pub(super) fn string(&self, name: &str) -> Option<String> {
        match self.get(name) {
            Some(AttributeValue::String(s)) => Some(String::from_utf8_lossy(s).into_owned()),
            _ => None,
        }
    }

    pub(super) fn ints(&self, name: &str) -> Option<Vec<i64>> {
        match self.get(name) {
            Some(AttributeValue::Ints(v)) => Some(v.clone()),
            _ => None,
        }
    }
}

/// Input `k`, which the op requires.
pub(super) fn arg<'a>(args: &[Option<&'a DynTensor>], k: usize) -> Result<&'a DynTensor> {
    args.get(k)
        .copied()
        .flatten()
        .ok_or_else(|| invalid(format!("input {k} is required but missing")))
}

/// The values of a small integer tensor (shapes, axes, indices).
fn ints_of(t: &DynTensor) -> Result<Vec<i64>> {
    match t.dtype() {
        DType::I64 => t.to_vec::<i64>(),
        other => Err(invalid(format!(
            "expected an integer tensor (a shape, axes or indices), got {other}"
        ))),
    }
}

/// An axis, negative counting from the end, as an index below `rank`.
pub(super) fn axis(value: i64, rank: usize) -> Result<usize> {
    let resolved = if value < 0 {
        value + rank as i64
    } else {
        value
    };
    if (0..rank as i64).contains(&resolved) {
        Ok(resolved as usize)
    } else {
        Err(invalid(format!(
            "axis {value} is out of range for rank {rank}"
        )))
    }
}

fn one(t: DynTensor) -> Result<Vec<DynTensor>> {
    Ok(vec![t])
}

/// Fails when `op` needs more multiply-adds than `limits` allow.
fn check_work(limits: &Limits, op: &str, multiply_adds: u64) -> Result<()> {
    limits.check_work(op, multiply_adds).map_err(invalid)
}

/// Checks, when the file is loaded, what can be known of `node` before it runs: the ranks
/// (`ranks`) and element types (`dtypes`) of its inputs that are initializers or graph
/// inputs (`None` for the others), and its attributes. What passes may still fail on the
/// values a run gives it; what fails here would fail at every run.
pub(super) fn check_at_load(
    node: &NodeProto,
    ranks: &[Option<usize>],
    dtypes: &[Option<DType>],
) -> Result<()> {
    let a = Attributes(node);
    let op = node.op_type.as_str();
    match op {
        "Conv" | "ConvTranspose" | "MaxPool" | "AveragePool" => window_ops::check(op, &a, ranks),
        "GatherElements" | "GatherND" => gather_ops::check(op, &a, ranks),
        "ScatterElements" | "ScatterND" => scatter_ops::check(op, &a, ranks),
        "Einsum" => einsum::check(&a, ranks.len()),
        "LSTM" | "GRU" => recurrent_ops::check(op, &a),
        _ => logic_ops::check(op, &a, dtypes),
    }
}

/// Runs one node on its inputs (`None` for an omitted optional input), refusing work past
/// `limits` before doing it.
pub fn evaluate(
    node: &NodeProto,
    args: &[Option<&DynTensor>],
    limits: &Limits,
) -> Result<Vec<DynTensor>> {
    let a = Attributes(node);
    let x = || arg(args, 0);
    match node.op_type.as_str() {
        "Identity" | "Dropout" => one(x()?.clone()),
        "Add" | "Sub" | "Mul" | "Div" | "Pow" => binary(&node.op_type, x()?, arg(args, 1)?),
        "Mod" => modulo(x()?, arg(args, 1)?, a.int("fmod", 0) != 0),
        "Abs" | "Neg" | "Sign" => one(logic_ops::signed_unary(&node.op_type, args)?),
        "And" | "Or" | "Xor" => one(logic_ops::logical(&node.op_type, args)?),
        "Not" => one(logic_ops::not(args)?),
        "IsNaN" => one(logic_ops::is_nan(args)?),
        "IsInf" => one(logic_ops::is_inf(&a, args)?),
        "GatherElements" => one(gather_ops::gather_elements(&a, args)?),
        "GatherND" => one(gather_ops::gather_nd(&a, args)?),
        "ScatterElements" => one(scatter_ops::scatter_elements(&a, args)?),
        "ScatterND" => one(scatter_ops::scatter_nd(&a, args)?),
        "LSTM" | "GRU" => recurrent_ops::run(&node.op_type, &a, args, limits),
        "Exp" => one(x()?.exp()?),
        "Log" => one(x()?.log()?),
        "Sqrt" => one(x()?.sqrt()?),
        "Relu" => one(x()?.relu()?),
        "Sigmoid" => one(x()?.sigmoid()?),
        "Tanh" => one(x()?.tanh()?),
        "Erf" => one(x()?.erf()?),
        "Sin" => one(x()?.sin()?),
        "Cos" => one(x()?.cos()?),
        "Floor" => one(x()?.floor()?),
        "Gelu" => match a.get("approximate") {
            Some(AttributeValue::String(s)) if s == b"tanh" => one(x()?.gelu_tanh()?),
            Some(AttributeValue::String(s)) if s != b"none" => Err(invalid(format!(
                "Gelu with approximate={:?}",
                String::from_utf8_lossy(s)
            ))),
            _ => one(x()?.gelu()?),
        },
        "Reciprocal" => one(x()?.powf(-1.0)?),
        // ONNX's softplus has no threshold; PyTorch's 20 differs from it by under e^-20.
        "Softplus" => one(x()?.softplus(1.0, 20.0)?),
        "LeakyRelu" => one(x()?.leaky_relu(f64::from(a.float("alpha", 0.01)))?),
        "Elu" => {
            // x for x > 0, alpha (e^x - 1) elsewhere
            let x = x()?;
            let alpha = f64::from(a.float("alpha", 1.0));
            let negative = x.exp()?.add_scalar(-1.0)?.mul_scalar(alpha)?;
            one(DynTensor::where_(&x.gt_scalar(0.0)?, x, &negative)?)
        }
        "HardSigmoid" => one(hard_sigmoid(
            x()?,
            f64::from(a.float("alpha", 0.2)),
            f64::from(a.float("beta", 0.5)),
        )?),
        "HardSwish" => {
            let x = x()?;
            one(x.mul(&hard_sigmoid(x, 1.0 / 6.0, 0.5)?)?)
        }
        "Max" | "Min" => extremum_of(&node.op_type, args),
        "ArgMax" => {
            if a.int("select_last_index", 0) != 0 {
                return Err(invalid("ArgMax with select_last_index=1 is not supported"));
            }
            let x = x()?;
            let at = axis(a.int("axis", 0), x.rank())?;
            one(x.argmax(at as isize, a.int("keepdims", 1) != 0)?)
        }
        "Resize" => resize(&a, args),
        "Clip" if x()?.dtype() == DType::I64 => one(logic_ops::integer_clip(args)?),
        "Clip" => {
            let bound = |k: usize, default: f64| -> Result<f64> {
                match args.get(k).copied().flatten() {
                    Some(t) => Ok(t.try_to_f64_vec()?.first().copied().unwrap_or(default)),
                    None => Ok(default),
                }
            };
            one(x()?.clamp(bound(1, f64::NEG_INFINITY)?, bound(2, f64::INFINITY)?)?)
        }
        "Cast" => one(x()?.to_dtype(cast_target(a.int("to", 1))?)?),
        "Equal" => one(x()?.eq(arg(args, 1)?)?),
        "Less" => one(x()?.lt(arg(args, 1)?)?),
        "LessOrEqual" => one(x()?.le(arg(args, 1)?)?),
        "Greater" => one(x()?.gt(arg(args, 1)?)?),
        "GreaterOrEqual" => one(x()?.ge(arg(args, 1)?)?),
        "Where" => one(DynTensor::where_(x()?, arg(args, 1)?, arg(args, 2)?)?),
        "MatMul" => {
            let (x, y) = (x()?, arg(args, 1)?);
            check_work(
                limits,
                "MatMul",
                limits::matmul_multiply_adds(x.dims(), y.dims()),
            )?;
            one(x.matmul(y)?)
        }
        "Gemm" => gemm(&a, args, limits),
        "Einsum" => one(einsum::einsum(&a, args, limits)?),
        "Conv" => window_ops::conv(&a, args, limits),
        "ConvTranspose" => window_ops::conv_transpose(&a, args, limits),
        "MaxPool" | "AveragePool" => window_ops::pool(&node.op_type, &a, x()?, limits),
        "GlobalAveragePool" => {
            let x = x()?;
            let axes: Vec<isize> = (2..x.rank() as isize).collect();
            one(x.mean(&axes, true)?)
        }
        "BatchNormalization" => one(norm_ops::batch_norm(
            args,
            a.int("training_mode", 0) != 0,
            f64::from(a.float("epsilon", 1e-5)),
        )?),
        "InstanceNormalization" => one(norm_ops::instance_norm(
            args,
            f64::from(a.float("epsilon", 1e-5)),
        )?),
        "LayerNormalization" => {
            let rank = arg(args, 0)?.rank();
            let from = axis(a.int("axis", -1), rank)?;
            one(norm_ops::layer_norm(
                args,
                from,
                f64::from(a.float("epsilon", 1e-5)),
            )?)
        }
        "Softmax" | "LogSoftmax" => {
            let x = x()?;
            let axis = axis(a.int("axis", -1), x.rank())? as isize;
            one(if node.op_type == "Softmax" {
                x.softmax(axis)?
            } else {
                x.log_softmax(axis)?
            })
        }
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd" => {
            reduce(&node.op_type, &a, args)
        }
        "Reshape" => reshape(x()?, &ints_of(arg(args, 1)?)?, a.int("allowzero", 0) != 0),
        "Flatten" => {
            let x = x()?;
            // An axis in [-rank, rank]: a negative one counts from the end of the dims, as
            // for any other op (-1 keeps the last dim), not from the end of [0, rank].
            let value = a.int("axis", 1);
            let at = match value {
                v if v < 0 => axis(v, x.rank())?,
                v => axis(v, x.rank() + 1)?,
            };
            let outer = crate::shape::checked_numel(&x.dims()[..at], "Flatten")?;
            let inner = crate::shape::checked_numel(&x.dims()[at..], "Flatten")?;
            one(x.reshape(&[outer, inner])?)
        }
        "Transpose" => {
            let x = x()?;
            let perm = match a.ints("perm") {
                Some(perm) => perm
                    .iter()
                    .map(|&p| axis(p, x.rank()))
                    .collect::<Result<Vec<_>>>()?,
                None => (0..x.rank()).rev().collect(),
            };
            one(x.permute(&perm)?)
        }
        "Unsqueeze" => {
            let x = x()?;
            let listed = ints_of(arg(args, 1)?)?;
            let rank = x.rank().saturating_add(listed.len());
            if rank > limits.max_rank {
                return Err(invalid(format!(
                    "Unsqueeze of a rank-{} input by {} axes gives rank {rank}, over the limit \
                     of {} (Limits::max_rank)",
                    x.rank(),
                    listed.len(),
                    limits.max_rank
                )));
            }
            let mut axes = listed
                .iter()
                .map(|&v| axis(v, rank))
                .collect::<Result<Vec<_>>>()?;
            axes.sort_unstable();
            if let Some(twice) = axes.windows(2).find(|pair| pair[0] == pair[1]) {
                return Err(invalid(format!(
                    "Unsqueeze axes {listed:?} name axis {} twice",
                    twice[0]
                )));
            }
            let mut out = x.clone();
            for a in axes {
                out = out.unsqueeze(a as isize)?;
            }
            one(out)
        }
        "Squeeze" => {
            let x = x()?;
            let mut axes = match args.get(1).copied().flatten() {
                Some(t) => ints_of(t)?
                    .iter()
                    .map(|&v| axis(v, x.rank()))
                    .collect::<Result<Vec<_>>>()?,
                None => (0..x.rank()).filter(|&k| x.dims()[k] == 1).collect(),
            };
            axes.sort_unstable();
            let mut out = x.clone();
            for a in axes.into_iter().rev() {
                out = out.squeeze(a as isize)?;
            }
            one(out)
        }
        "Concat" => {
            let parts: Vec<&DynTensor> = args.iter().flatten().copied().collect();
            let rank = parts.first().map_or(1, |t| t.rank());
            one(DynTensor::cat(
                &parts,
                axis(a.int("axis", 0), rank)? as isize,
            )?)
        }
        "Slice" => slice(args),
        "CumSum" => {
            let x = x()?;
            let at = axis(
                ints_of(arg(args, 1)?)?.first().copied().unwrap_or(0),
                x.rank(),
            )? as isize;
            // reverse: sums from the end; exclusive: without the element itself.
            let reverse = a.int("reverse", 0) != 0;
            let flipped = |t: &DynTensor| {
                if reverse {
                    t.flip(&[at])
                } else {
                    Ok(t.clone())
                }
            };
            let mut sums = flipped(x)?.cumsum(at)?;
            if a.int("exclusive", 0) != 0 {
                sums = sums.sub(&flipped(x)?)?;
            }
            one(flipped(&sums)?)
        }
        "Split" => {
            let x = x()?;
            let sizes = args.get(1).copied().flatten().map(ints_of).transpose()?;
            let at = axis(a.int("axis", 0), x.rank())?;
            tensor_ops::split(x, at, sizes, node.outputs.len())
        }
        "Tile" => {
            let x = x()?;
            let repeats = ints_of(arg(args, 1)?)?;
            let times = repeats
                .iter()
                .map(|&t| usize::try_from(t).map_err(|_| invalid(format!("Tile by {repeats:?}"))))
                .collect::<Result<Vec<_>>>()?;
            if times.len() != x.rank() {
                return Err(invalid(format!(
                    "Tile of a rank-{} input by {repeats:?}: one count per axis",
                    x.rank()
                )));
            }
            one(x.repeat(&times)?)
        }
        "Trilu" => {
            let k = match args.get(1).copied().flatten() {
                Some(k) => ints_of(k)?.first().copied().unwrap_or(0),
                None => 0,
            };
            one(if a.int("upper", 1) != 0 {
                x()?.triu(k)?
            } else {
                x()?.tril(k)?
            })
        }
        "Gather" => gather(x()?, arg(args, 1)?, a.int("axis", 0)),
        "Shape" => {
            let dims: Vec<i64> = x()?.dims().iter().map(|&d| d as i64).collect();
            let n = dims.len();
            let rank = n as i64;
            let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
            let start = clamp(a.int("start", 0));
            let end = clamp(a.int("end", rank));
            let picked = dims[start..end.max(start)].to_vec();
            let len = picked.len();
            one(DynTensor::from_vec(picked, &[len])?)
        }
        "Constant" => constant(&a),
        "Range" => one(tensor_ops::range(x()?, arg(args, 1)?, arg(args, 2)?)?),
        "ConstantOfShape" => {
            let dims: Vec<usize> = ints_of(x()?)?
                .iter()
                .map(|&d| usize::try_from(d).map_err(|_| invalid(format!("a dim of {d}"))))
                .collect::<Result<_>>()?;
            let (value, dtype) = match a.get("value") {
                Some(AttributeValue::Tensor(t)) => {
                    let t = tensor_of(t.clone())?;
                    (
                        t.try_to_f64_vec()?.first().copied().unwrap_or(0.0),
                        t.dtype(),
                    )
                }
                _ => (0.0, DType::F32),
            };
            one(DynTensor::full(&dims, value, dtype)?)
        }
        "Expand" => {
            let x = x()?;
            let shape = ints_of(arg(args, 1)?)?;
            let rank = shape.len().max(x.rank());
            let mut dims = vec![1usize; rank];
            for (k, d) in dims.iter_mut().enumerate() {
                let from_x = (k + x.rank()).checked_sub(rank).map(|i| x.dims()[i]);
                let from_shape = (k + shape.len())
                    .checked_sub(rank)
                    .map(|i| shape[i].max(0) as usize);
                *d = match (from_x, from_shape) {
                    (Some(1), Some(s)) | (None, Some(s)) => s,
                    (Some(xd), Some(1)) | (Some(xd), None) => xd,
                    (Some(xd), Some(s)) if xd == s => xd,
                    (xd, s) => return Err(invalid(format!("cannot expand {xd:?} to {s:?}"))),
                };
            }
            one(x.broadcast_to(&dims)?)
        }
        other => Err(invalid(format!("{other} is not an op rumus imports"))),
    }
}

/// `ai.onnx` data type codes a `Cast` may target.
fn cast_target(code: i64) -> Result<DType> {
    match code {
        1 => Ok(DType::F32),
        10 => Ok(DType::F16),
        11 => Ok(DType::F64),
        6 | 7 => Ok(DType::I64),
        9 => Ok(DType::Bool),
        other => Err(invalid(format!(
            "Cast to data type {other} is not supported"
        ))),
    }
}

/// Arithmetic; on integer tensors (shape arithmetic) computed on the host.
fn binary(op: &str, lhs: &DynTensor, rhs: &DynTensor) -> Result<Vec<DynTensor>> {
    if lhs.dtype() == DType::I64 && rhs.dtype() == DType::I64 {
        return integer_elementwise(op, lhs, rhs, |a, b| match op {
            "Add" => Ok(a.wrapping_add(b)),
            "Sub" => Ok(a.wrapping_sub(b)),
            "Mul" => Ok(a.wrapping_mul(b)),
            // Truncating, as ONNX runtimes divide integers (C's `/`).
            "Div" => a
                .checked_div(b)
                .ok_or_else(|| invalid(format!("integer Div of {a} by {b}"))),
            _ => Err(invalid(format!("integer {op} of {a} and {b}"))),
        });
    }
    one(match op {
        "Add" => lhs.add(rhs)?,
        "Sub" => lhs.sub(rhs)?,
        "Mul" => lhs.mul(rhs)?,
        "Div" => lhs.div(rhs)?,
        // Pow's exponent may be of another type than its base (an integer power of a float),
        // and the result is the base's.
        _ if rhs.dtype() != lhs.dtype() => lhs.pow(&rhs.to_dtype(lhs.dtype())?)?,
        _ => lhs.pow(rhs)?,
    })
}

/// `f` of two integer tensors' elements, on the host, broadcast as numpy does (a row
/// minus a column is a matrix, as `arange(t)[None, :] - arange(t)[:, None]` exports).
fn integer_elementwise(
    op: &str,
    lhs: &DynTensor,
    rhs: &DynTensor,
    f: impl Fn(i64, i64) -> Result<i64>,
) -> Result<Vec<DynTensor>> {
    let dims = crate::shape::broadcast_shapes(lhs.dims(), rhs.dims(), op)?;
    let (l, r) = (
        ints_of(&lhs.broadcast_to(&dims)?)?,
        ints_of(&rhs.broadcast_to(&dims)?)?,
    );
    let values = l
        .into_iter()
        .zip(r)
        .map(|(a, b)| f(a, b))
        .collect::<Result<Vec<i64>>>()?;
    one(DynTensor::from_vec(values, &dims)?)
}

/// ONNX `Mod` of integers: the remainder with the divisor's sign (Python's `%`), or with the
/// dividend's when `fmod` (C's `%`). Floating-point `Mod` is not imported.
fn modulo(lhs: &DynTensor, rhs: &DynTensor, fmod: bool) -> Result<Vec<DynTensor>> {
    if lhs.dtype() != DType::I64 || rhs.dtype() != DType::I64 {
        return Err(invalid(format!(
            "Mod of {} and {}: rumus imports integer Mod only",
            lhs.dtype(),
            rhs.dtype()
        )));
    }
    integer_elementwise("Mod", lhs, rhs, |a, b| {
        let r = a
            .checked_rem(b)
            .ok_or_else(|| invalid(format!("integer Mod of {a} by {b}")))?;
        Ok(if !fmod && r != 0 && (r < 0) != (b < 0) {
            r + b
        } else {
            r
        })
    })
}

/// `max(0, min(1, alpha x + beta))`.
fn hard_sigmoid(x: &DynTensor, alpha: f64, beta: f64) -> Result<DynTensor> {
    x.mul_scalar(alpha)?.add_scalar(beta)?.clamp(0.0, 1.0)
}

/// Element-wise `Max` or `Min` of its inputs, broadcast; a NaN in any input gives NaN there.
fn extremum_of(op: &str, args: &[Option<&DynTensor>]) -> Result<Vec<DynTensor>> {
    let mut inputs = args.iter().flatten();
    let first = inputs
        .next()
        .ok_or_else(|| invalid(format!("{op} of no inputs")))?;
    let mut out = (*first).clone();
    for next in inputs {
        out = if op == "Max" {
            out.maximum(next)?
        } else {
            out.minimum(next)?
        };
    }
    one(out)
}

/// `Resize` in `nearest` or `linear` mode with the coordinate modes PyTorch's exporters and
/// most others write (`half_pixel`, `pytorch_half_pixel`, `asymmetric`, `align_corners`), to
/// `sizes` or by `scales`; cubic resampling, cropping and antialiasing are errors.
fn resize(a: &Attributes<'_>, args: &[Option<&DynTensor>]) -> Result<Vec<DynTensor>> {
    use tensor_ops::{Coordinates, Sampling};
    let text = |name: &str, default: &str| a.string(name).unwrap_or_else(|| default.to_string());
    let (mode, coordinates, rounding) = (
        text("mode", "nearest"),
        text("coordinate_transformation_mode", "half_pixel"),
        text("nearest_mode", "round_prefer_floor"),
    );
    let unsupported = || {
        invalid(format!(
            "Resize in mode {mode} ({coordinates}, {rounding}): rumus imports nearest and linear \
             resampling with half_pixel, pytorch_half_pixel, asymmetric or align_corners \
             coordinates, without axes, antialias or a kept aspect ratio"
        ))
    };
    let sampling = match (mode.as_str(), rounding.as_str()) {
        ("linear", _) => Sampling::Linear,
        ("nearest", "round_prefer_floor") => Sampling::NearestRoundPreferFloor,
        ("nearest", "round_prefer_ceil") => Sampling::NearestRoundPreferCeil,
        ("nearest", "floor") => Sampling::NearestFloor,
        ("nearest", "ceil") => Sampling::NearestCeil,
        _ => return Err(unsupported()),
    };
    let coordinates_mode = match coordinates.as_str() {
        "half_pixel" => Coordinates::HalfPixel,
        "pytorch_half_pixel" => Coordinates::PytorchHalfPixel,
        "asymmetric" => Coordinates::Asymmetric,
        "align_corners" => Coordinates::AlignCorners,
        _ => return Err(unsupported()),
    };
    if a.get("axes").is_some()
        || a.int("antialias", 0) != 0
        || text("keep_aspect_ratio_policy", "stretch") != "stretch"
    {
        return Err(unsupported());
    }
    let x = arg(args, 0)?;
    let given = |k: usize| args.get(k).copied().flatten().filter(|t| t.numel() > 0);
    let (sizes, scales): (Vec<usize>, Vec<f64>) = match (given(2), given(3)) {
        (Some(scales), _) => {
            let scales = scales.try_to_f64_vec()?;
            let sizes = scales
                .iter()
                .zip(x.dims())
                .map(|(&s, &d)| {
                    let size = (d as f64 * s).floor();
                    if size.is_finite() && size >= 0.0 && size <= u32::MAX as f64 {
                        Ok(size as usize)
                    } else {
                        Err(invalid(format!("Resize of {:?} by {scales:?}", x.dims())))
                    }
                })
                .collect::<Result<_>>()?;
            (sizes, scales)
        }
        (None, Some(sizes)) => {
            let sizes = ints_of(sizes)?
                .iter()
                .map(|&s| usize::try_from(s).map_err(|_| invalid(format!("Resize to size {s}"))))
                .collect::<Result<Vec<usize>>>()?;
            let scales = sizes
                .iter()
                .zip(x.dims())
                .map(|(&s, &d)| s as f64 / d.max(1) as f64)
                .collect();
            (sizes, scales)
        }
        (None, None) => return Err(invalid("Resize without scales or sizes")),
    };
    one(tensor_ops::resize(
        x,
        &sizes,
        &scales,
        coordinates_mode,
        sampling,
    )?)
}

/// `alpha * A' @ B' + beta * C`, the primes being optional transposes.
fn gemm(
    a: &Attributes<'_>,
    args: &[Option<&DynTensor>],
    limits: &Limits,
) -> Result<Vec<DynTensor>> {
    let mut lhs = arg(args, 0)?.clone();
    let mut rhs = arg(args, 1)?.clone();
    if a.int("transA", 0) != 0 {
        lhs = lhs.transpose(0, 1)?;
    }
    if a.int("transB", 0) != 0 {
        rhs = rhs.transpose(0, 1)?;
    }
    let (alpha, beta) = (
        f64::from(a.float("alpha", 1.0)),
        f64::from(a.float("beta", 1.0)),
    );
    check_work(
        limits,
        "Gemm",
        limits::matmul_multiply_adds(lhs.dims(), rhs.dims()),
    )?;
    let mut out = lhs.matmul(&rhs)?;
    if alpha != 1.0 {
        out = out.mul_scalar(alpha)?;
    }
    if let Some(c) = args.get(2).copied().flatten() {
        out = if beta == 1.0 {
            out.add(c)?
        } else {
            out.add(&c.mul_scalar(beta)?)?
        };
    }
    one(out)
}

fn reduce(op: &str, a: &Attributes<'_>, args: &[Option<&DynTensor>]) -> Result<Vec<DynTensor>> {
    let x = arg(args, 0)?;
    let keepdim = a.int("keepdims", 1) != 0;
    // ReduceSum takes its axes as an input from opset 13, the others from opset 18.
    let listed = match args.get(1).copied().flatten() {
        Some(t) => Some(ints_of(t)?),
        None => a.ints("axes"),
    };
    let axes: Vec<isize> = match listed {
        Some(axes) if !axes.is_empty() => axes
            .iter()
            .map(|&v| axis(v, x.rank()).map(|a| a as isize))
            .collect::<Result<_>>()?,
        _ if a.int("noop_with_empty_axes", 0) != 0 => return one(x.clone()),
        _ => (0..x.rank() as isize).collect(),
    };
    one(match op {
        "ReduceMean" => x.mean(&axes, keepdim)?,
        "ReduceSum" => x.sum(&axes, keepdim)?,
        "ReduceMin" => x.min(&axes, keepdim)?,
        "ReduceProd" => product(x, &axes, keepdim)?,
        _ => x.max(&axes, keepdim)?,
    })
}

/// `ReduceProd`: the product over `axes`, on the host (rumus has no product kernel; exported
/// graphs take products of small shape tensors, a sequence's length times its batch). Integers
/// multiply exactly, with wrapping as onnxruntime's do; floats in f64, rounded once to their
/// dtype.
fn product(x: &DynTensor, axes: &[isize], keepdim: bool) -> Result<DynTensor> {
    let reduced: Vec<usize> = axes.iter().map(|&a| a as usize).collect();
    let kept: Vec<usize> = (0..x.rank()).filter(|a| !reduced.contains(a)).collect();
    let order: Vec<usize> = kept.iter().chain(&reduced).copied().collect();
    let inner: usize = reduced.iter().map(|&a| x.dims()[a]).product();
    let outputs: usize = kept.iter().map(|&a| x.dims()[a]).product();
    let dims: Vec<usize> = (0..x.rank())
        .filter_map(|a| match (reduced.contains(&a), keepdim) {
            (false, _) => Some(x.dims()[a]),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    let grouped = x.permute(&order)?.contiguous()?;
    let out = if x.dtype() == DType::I64 {
        let values = grouped.to_vec::<i64>()?;
        let products = row_products(&values, (outputs, inner), 1i64, |a, b| a.wrapping_mul(b));
        DynTensor::from_vec(products, &dims)?
    } else {
        let values = grouped.try_to_f64_vec()?;
        let products = row_products(&values, (outputs, inner), 1.0, |a, b| a * b);
        DynTensor::from_vec(products, &dims)?.to_dtype(x.dtype())?
    };
    out.to(&x.device())
}

/// The products of `outputs` runs of `inner` neighbouring values (each `unit` when the runs
/// are empty).
fn row_products<T: Copy>(
    values: &[T],
    (outputs, inner): (usize, usize),
    unit: T,
    times: fn(T, T) -> T,
) -> Vec<T> {
    if inner == 0 {
        return vec![unit; outputs];
    }
    values
        .chunks_exact(inner)
        .map(|run| run.iter().fold(unit, |p, &v| times(p, v)))
        .collect()
}

/// ONNX `Reshape`: a 0 keeps the input's dim (unless `allowzero`), one -1 is inferred.
fn reshape(x: &DynTensor, shape: &[i64], allow_zero: bool) -> Result<Vec<DynTensor>> {
    let mut dims = Vec::with_capacity(shape.len());
    let mut inferred = None;
    for (k, &d) in shape.iter().enumerate() {
        match d {
            -1 if inferred.is_none() => {
                inferred = Some(k);
                dims.push(1);
            }
            0 if !allow_zero => dims.push(
                *x.dims()
                    .get(k)
                    .ok_or_else(|| invalid(format!("shape {shape:?} copies a missing dim")))?,
            ),
            d if d >= 0 => dims.push(d as usize),
            _ => return Err(invalid(format!("shape {shape:?}"))),
        }
    }
    if let Some(k) = inferred {
        let known = crate::shape::checked_numel(&dims, "Reshape")?;
        if known == 0 || !x.numel().is_multiple_of(known) {
            return Err(invalid(format!(
                "cannot reshape {:?} to {shape:?}",
                x.dims()
            )));
        }
        dims[k] = x.numel() / known;
    }
    one(x.reshape(&dims)?)
}

/// `Slice`: starts and ends clamped to each axis as ONNX defines, steps of any sign (a
/// negative one walks backwards: `x[::-1]`, `torch.flip`). Unit steps are views; others
/// gather the elements they pick.
fn slice(args: &[Option<&DynTensor>]) -> Result<Vec<DynTensor>> {
    let x = arg(args, 0)?;
    let starts = ints_of(arg(args, 1)?)?;
    let ends = ints_of(arg(args, 2)?)?;
    let axes = match args.get(3).copied().flatten() {
        Some(t) => ints_of(t)?,
        None => (0..starts.len() as i64).collect(),
    };
    let steps = match args.get(4).copied().flatten() {
        Some(t) => ints_of(t)?,
        None => vec![1; starts.len()],
    };
    if starts.len() != ends.len() || starts.len() != axes.len() || starts.len() != steps.len() {
        return Err(invalid(
            "Slice: starts, ends, axes and steps differ in length",
        ));
    }
    let mut out = x.clone();
    for (((&start, &end), &ax), &step) in starts.iter().zip(&ends).zip(&axes).zip(&steps) {
        let ax = axis(ax, x.rank())?;
        let size = x.dims()[ax] as i64;
        let from_end = |v: i64| if v < 0 { v.saturating_add(size) } else { v };
        if step == 1 {
            let (s, e) = (from_end(start).clamp(0, size), from_end(end).clamp(0, size));
            out = out.narrow(ax as isize, s as usize, (e - s).max(0) as usize)?;
            continue;
        }
        // The first index and how many the step picks, counted before any is listed: the
        // axis may be a broadcast view far longer than memory.
        let (first, count) = match step {
            0 => return Err(invalid("Slice with a step of 0")),
            _ if size == 0 => (0, 0),
            step if step > 0 => {
                let (s, e) = (from_end(start).clamp(0, size), from_end(end).clamp(0, size));
                (s, if e > s { (e - s - 1) / step + 1 } else { 0 })
            }
            step => {
                // Backwards from `start` down to just above `end` (-1: through index 0).
                let s = from_end(start).clamp(0, size - 1);
                let e = from_end(end).clamp(-1, size - 1);
                let stride = step.saturating_neg();
                (s, if s > e { (s - e - 1) / stride + 1 } else { 0 })
            }
        };
        crate::alloc::ensure_output("Slice", &[count as usize], 8)?;
        let picked: Vec<i64> = (0..count).map(|i| first + i * step).collect();
        let count = picked.len();
        let picked = DynTensor::from_vec(picked, &[count])?.to(&out.device())?;
        out = out.index_select(ax as isize, &picked)?;
    }
    one(out)
}

/// `Gather` along `axis`: indices of any shape (negative from the end) replace that axis.
fn gather(data: &DynTensor, indices: &DynTensor, axis_value: i64) -> Result<Vec<DynTensor>> {
    let ax = axis(axis_value, data.rank())?;
    let size = data.dims()[ax] as i64;
    let flat: Vec<i64> = ints_of(indices)?
        .into_iter()
        .map(|i| if i < 0 { i + size } else { i })
        .collect();
    let count = flat.len();
    let flat = DynTensor::from_vec(flat, &[count])?.to(&data.device())?;
    let picked = data.index_select(ax as isize, &flat)?;
    let mut dims = data.dims()[..ax].to_vec();
    dims.extend_from_slice(indices.dims());
    dims.extend_from_slice(&data.dims()[ax + 1..]);
    one(picked.reshape(&dims)?)
}

fn constant(a: &Attributes<'_>) -> Result<Vec<DynTensor>> {
    let tensor = match a
        .0
        .attributes
        .first()
        .map(|(name, value)| (name.as_str(), value))
    {
        Some(("value", AttributeValue::Tensor(t))) => tensor_of(t.clone())?,
        Some(("value_float", AttributeValue::Float(v))) => DynTensor::from_vec(vec![*v], &[])?,
        Some(("value_floats", AttributeValue::Floats(v))) => {
            DynTensor::from_vec(v.clone(), &[v.len()])?
        }
        Some(("value_int", AttributeValue::Int(v))) => DynTensor::from_vec(vec![*v], &[])?,
        Some(("value_ints", AttributeValue::Ints(v))) => {
            DynTensor::from_vec(v.clone(), &[v.len()])?
        }
        other => {
            return Err(invalid(format!(
                "Constant with attribute {:?} is not supported",
                other.map(|(n, _)| n)
            )));
        }
    };
    one(tensor)
}
