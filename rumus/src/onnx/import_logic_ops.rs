//! Imported ONNX ops on masks and signs: `And`, `Or`, `Xor`, `Not` of `bool` tensors
//! (attention masks), `IsNaN` and `IsInf` (the NaN guards of exported attention), and the
//! integer forms of `Abs`, `Neg`, `Sign` and `Clip` (T5's relative position buckets), which
//! ONNX defines with wrapping two's-complement arithmetic and rumus computes on the host.

use super::import_ops::{Attributes, arg, invalid};
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::DynTensor;

/// Checks what loading knows of a node of these ops: the element types of inputs that are
/// initializers, `IsInf`'s attributes.
pub(super) fn check(op: &str, a: &Attributes<'_>, dtypes: &[Option<DType>]) -> Result<()> {
    let each = |check: fn(&str, DType) -> Result<()>| {
        dtypes
            .iter()
            .flatten()
            .try_for_each(|&dtype| check(op, dtype))
    };
    match op {
        "And" | "Or" | "Xor" | "Not" => each(require_bool),
        "IsNaN" => each(require_float),
        "IsInf" => each(require_float).and(inf_flags(a).map(drop)),
        _ => Ok(()),
    }
}

fn require_bool(op: &str, dtype: DType) -> Result<()> {
    if dtype == DType::Bool {
        return Ok(());
    }
    Err(invalid(format!(
        "{op} of {dtype}: ONNX defines it on bool tensors only"
    )))
}

/// `IsNaN`, `IsInf` are defined on floats only.
fn require_float(op: &str, dtype: DType) -> Result<()> {
    if dtype.is_float() {
        return Ok(());
    }
    Err(invalid(format!(
        "{op} of {dtype}: ONNX defines it on floating-point tensors only"
    )))
}

/// `IsInf`'s `detect_positive` and `detect_negative` (1 by default; each 0 or 1).
fn inf_flags(a: &Attributes<'_>) -> Result<(bool, bool)> {
    let flag = |name: &str| match a.checked_int(name, 1)? {
        0 => Ok(false),
        1 => Ok(true),
        other => Err(invalid(format!(
            "attribute {name} = {other}: expected 0 or 1"
        ))),
    };
    Ok((flag("detect_positive")?, flag("detect_negative")?))
}

/// `And`, `Or`, `Xor` of two `bool` tensors, broadcast.
pub(super) fn logical(op: &str, args: &[Option<&DynTensor>]) -> Result<DynTensor> {
    let (a, b) = (arg(args, 0)?, arg(args, 1)?);
    require_bool(op, a.dtype())?;
    require_bool(op, b.dtype())?;
    match op {
        "And" => a.logical_and(b),
        "Or" => a.logical_or(b),
        // Two masks differ exactly where one of them holds.
        _ => a.ne(b),
    }
}

/// `Not` of a `bool` tensor.
pub(super) fn not(args: &[Option<&DynTensor>]) -> Result<DynTensor> {
    let x = arg(args, 0)?;
    require_bool("Not", x.dtype())?;
    x.logical_not()
}

/// A floating-point input of `op`.
fn float_input<'a>(op: &str, args: &[Option<&'a DynTensor>]) -> Result<&'a DynTensor> {
    let x = arg(args, 0)?;
    require_float(op, x.dtype())?;
    Ok(x)
}

/// `IsNaN`: NaN is the one value unequal to itself.
pub(super) fn is_nan(args: &[Option<&DynTensor>]) -> Result<DynTensor> {
    let x = float_input("IsNaN", args)?;
    x.ne(x)
}

/// `IsInf`, reporting +inf when `detect_positive` and -inf when `detect_negative`.
pub(super) fn is_inf(a: &Attributes<'_>, args: &[Option<&DynTensor>]) -> Result<DynTensor> {
    let (positive, negative) = inf_flags(a)?;
    let x = float_input("IsInf", args)?;
    let equal_to = |value: f64| x.eq(&DynTensor::scalar(value, x.dtype())?);
    match (positive, negative) {
        (true, true) => equal_to(f64::INFINITY)?.logical_or(&equal_to(f64::NEG_INFINITY)?),
        (true, false) => equal_to(f64::INFINITY),
        (false, true) => equal_to(f64::NEG_INFINITY),
        (false, false) => DynTensor::zeros(x.dims(), DType::Bool),
    }
}

/// `Abs`, `Neg` or `Sign`: rumus's float ops, or on `int64` the exact integer result with
/// ONNX runtimes' wrapping (`Abs` and `Neg` of `i64::MIN` are `i64::MIN`).
pub(super) fn signed_unary(op: &str, args: &[Option<&DynTensor>]) -> Result<DynTensor> {
    let x = arg(args, 0)?;
    if x.dtype() != DType::I64 {
        return match op {
            "Abs" => x.abs(),
            "Neg" => x.neg(),
            _ => x.sign(),
        };
    }
    let f = match op {
        "Abs" => i64::wrapping_abs,
        "Neg" => i64::wrapping_neg,
        _ => i64::signum,
    };
    let values: Vec<i64> = x.to_vec::<i64>()?.into_iter().map(f).collect();
    Ok(DynTensor::from_vec(values, x.dims())?)
}

/// `Clip` of an `int64` tensor, exactly: `min(max(x, min), max)` (so `max` wins where the
/// bounds cross, as onnxruntime has it), each bound an optional single `int64` value.
pub(super) fn integer_clip(args: &[Option<&DynTensor>]) -> Result<DynTensor> {
    let x = arg(args, 0)?;
    let bound = |k: usize, default: i64| -> Result<i64> {
        let Some(t) = args.get(k).copied().flatten() else {
            return Ok(default);
        };
        match (t.dtype(), t.numel()) {
            (DType::I64, 1) => Ok(t.to_vec::<i64>()?[0]),
            (dtype, _) => Err(invalid(format!(
                "Clip of int64 by a bound of {dtype} {:?}: expected one int64 value",
                t.dims()
            ))),
        }
    };
    let (low, high) = (bound(1, i64::MIN)?, bound(2, i64::MAX)?);
    let values: Vec<i64> = x
        .to_vec::<i64>()?
        .into_iter()
        .map(|v| v.max(low).min(high))
        .collect();
    Ok(DynTensor::from_vec(values, x.dims())?)
}
