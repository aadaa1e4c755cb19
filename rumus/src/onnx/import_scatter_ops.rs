//! Imported ONNX scatters: `ScatterElements` (PyTorch's `scatter` and `scatter_add`) and
//! `ScatterND` (an indexed assignment `x[idx] = v`, as both exporters write `index_put`).
//! Reduction `none` writes each update where its index points and `add` adds it there;
//! `mul`, `max` and `min` are refused when the file is loaded. Indices are resolved on the
//! host first, so one out of range is an error naming it, and so is an index written twice
//! under `none`, whose result ONNX leaves undefined (rumus refuses rather than pick one).

use super::import_gather_ops::{element_indices, elements_axis, index_values, resolve};
use super::import_ops::{Attributes, arg, invalid};
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::DynTensor;

/// How updates meet the data they land on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reduction {
    /// The update replaces the value.
    Replace,
    /// The update is added to it.
    Add,
}

/// The node's `reduction` attribute, or the error naming an unsupported one.
fn reduction(op: &str, a: &Attributes<'_>) -> Result<Reduction> {
    match a.string("reduction").as_deref() {
        None | Some("none") => Ok(Reduction::Replace),
        Some("add") => Ok(Reduction::Add),
        Some(other) => Err(invalid(format!(
            "{op} with reduction = \"{other}\" is not supported (rumus imports \"none\" and \
             \"add\")"
        ))),
    }
}

/// Checks what loading knows of a node of these ops: its reduction, and its axis against
/// the data's rank where the data is an initializer or a graph input.
pub(super) fn check(op: &str, a: &Attributes<'_>, ranks: &[Option<usize>]) -> Result<()> {
    reduction(op, a)?;
    match (op, ranks.first().copied().flatten()) {
        ("ScatterElements", Some(rank)) => elements_axis(a, rank).map(drop),
        _ => Ok(()),
    }
}

/// The error for two updates aimed at one place under reduction `none`.
fn written_twice(op: &str, first: usize, second: usize) -> crate::Error {
    invalid(format!(
        "{op} with reduction \"none\": updates {first} and {second} write the same element, \
         which ONNX leaves undefined; make the indices unique or use reduction \"add\""
    ))
}

/// `scattered` where `written` holds and `data` elsewhere: one flag per element of `data`,
/// or (when there are fewer) one per slice of its first axis.
fn replace_where_written(
    data: &DynTensor,
    scattered: &DynTensor,
    written: Vec<bool>,
) -> Result<DynTensor> {
    let mask_dims = if written.len() == data.numel() {
        data.dims().to_vec()
    } else {
        let mut dims = vec![1; data.rank()];
        dims[0] = written.len();
        dims
    };
    let mask = DynTensor::from_vec(written, &mask_dims)?.to(&data.device())?;
    DynTensor::where_(&mask, scattered, data)
}

/// `ScatterElements`: `out = data`, then for each position p of `indices`, the element at
/// `p with its axis coordinate replaced by indices[p]` gets `updates[p]` (or has it added).
pub(super) fn scatter_elements(
    a: &Attributes<'_>,
    args: &[Option<&DynTensor>],
) -> Result<DynTensor> {
    const OP: &str = "ScatterElements";
    let (data, indices, updates) = (arg(args, 0)?, arg(args, 1)?, arg(args, 2)?);
    let at = elements_axis(a, data.rank())?;
    let how = reduction(OP, a)?;
    if updates.dims() != indices.dims() {
        return Err(invalid(format!(
            "{OP}: updates {:?} and indices {:?} must have the same shape",
            updates.dims(),
            indices.dims()
        )));
    }
    let resolved = element_indices(OP, data, indices, at)?;
    // Where each update lands in data's row-major order.
    let strides = row_major_strides(data.dims());
    let mut coords = vec![0usize; indices.rank()];
    let mut offsets = Vec::with_capacity(resolved.len());
    for &target in &resolved {
        let offset: usize = coords
            .iter()
            .enumerate()
            .map(|(d, &c)| if d == at { target as usize } else { c } * strides[d])
            .sum();
        offsets.push(offset);
        advance(&mut coords, indices.dims());
    }
    let written = written_once(OP, how, &offsets, data.numel())?;
    if data.dtype() == DType::I64 {
        return scatter_integers(data, &offsets, updates, how);
    }
    let index = DynTensor::from_vec(resolved, indices.dims())?.to(&data.device())?;
    if how == Reduction::Add {
        return data.scatter_add(at as isize, &index, updates);
    }
    let scattered = data
        .zeros_like()?
        .scatter_add(at as isize, &index, updates)?;
    replace_where_written(data, &scattered, written)
}

/// Which of `slots` places the updates write (update k at `offsets[k]`); under reduction
/// `none`, the error for a place written twice.
fn written_once(op: &str, how: Reduction, offsets: &[usize], slots: usize) -> Result<Vec<bool>> {
    let mut writer = vec![None; slots];
    for (k, &offset) in offsets.iter().enumerate() {
        match writer[offset] {
            Some(first) if how == Reduction::Replace => return Err(written_twice(op, first, k)),
            _ => writer[offset] = Some(k),
        }
    }
    Ok(writer.iter().map(Option::is_some).collect())
}

/// An integer scatter (the small index and shape tensors of exported graphs), on the host:
/// update k is the k-th run of neighbouring values of `updates`, as long as each run of
/// `data` the offsets count in; additions wrap, as onnxruntime's do.
fn scatter_integers(
    data: &DynTensor,
    offsets: &[usize],
    updates: &DynTensor,
    how: Reduction,
) -> Result<DynTensor> {
    let mut values = data.to_vec::<i64>()?;
    let news = updates.to_dtype(DType::I64)?.to_vec::<i64>()?;
    let run = news.len().checked_div(offsets.len()).unwrap_or(0);
    for (&offset, update) in offsets.iter().zip(news.chunks_exact(run.max(1))) {
        let target = &mut values[offset * run..(offset + 1) * run];
        for (old, &new) in target.iter_mut().zip(update) {
            *old = match how {
                Reduction::Replace => new,
                Reduction::Add => old.wrapping_add(new),
            };
        }
    }
    DynTensor::from_vec(values, data.dims())?.to(&data.device())
}

/// `ScatterND`: each row of the last axis of `indices` (`k` values) names a slice
/// `data[i_0, ..., i_{k-1}, ...]`, which gets the matching slice of `updates` (or has it
/// added). Computed as one `index_add` on data with the indexed axes folded into one.
pub(super) fn scatter_nd(a: &Attributes<'_>, args: &[Option<&DynTensor>]) -> Result<DynTensor> {
    const OP: &str = "ScatterND";
    let (data, indices, updates) = (arg(args, 0)?, arg(args, 1)?, arg(args, 2)?);
    let how = reduction(OP, a)?;
    let (ddims, idims) = (data.dims(), indices.dims());
    let k = idims.last().copied().unwrap_or(0);
    if idims.is_empty() || k < 1 || k > ddims.len() {
        return Err(invalid(format!(
            "{OP} of data {ddims:?} by indices {idims:?}: the last index axis must hold 1 to {} \
             values",
            ddims.len()
        )));
    }
    let mut expected = idims[..idims.len() - 1].to_vec();
    expected.extend_from_slice(&ddims[k..]);
    if updates.dims() != expected {
        return Err(invalid(format!(
            "{OP} of data {ddims:?} by indices {idims:?}: updates {:?} must have shape \
             {expected:?}",
            updates.dims()
        )));
    }
    let indexed = &ddims[..k];
    let rest = &ddims[k..];
    let values = index_values(OP, indices)?;
    let tuples = values.len() / k;
    let mut rows = Vec::with_capacity(tuples);
    for (t, tuple) in values.chunks_exact(k).enumerate() {
        let mut offset = 0i64;
        for (j, (&i, &size)) in tuple.iter().zip(indexed).enumerate() {
            offset = offset * size as i64 + resolve(OP, i, size, t * k + j, j)?;
        }
        rows.push(offset);
    }
    let slots: usize = indexed.iter().product();
    let mut folded = vec![slots];
    folded.extend_from_slice(rest);
    let mut folded_updates = vec![tuples];
    folded_updates.extend_from_slice(rest);
    let (flat, flat_updates) = (data.reshape(&folded)?, updates.reshape(&folded_updates)?);
    let offsets: Vec<usize> = rows.iter().map(|&r| r as usize).collect();
    let written = written_once(OP, how, &offsets, slots)?;
    if data.dtype() == DType::I64 {
        return scatter_integers(data, &offsets, updates, how);
    }
    let index = DynTensor::from_vec(rows, &[tuples])?.to(&data.device())?;
    let out = if how == Reduction::Add {
        flat.index_add(0, &index, &flat_updates)?
    } else {
        let scattered = flat.zeros_like()?.index_add(0, &index, &flat_updates)?;
        replace_where_written(&flat, &scattered, written)?
    };
    out.reshape(ddims)
}

/// The row-major strides of `dims`, in elements.
fn row_major_strides(dims: &[usize]) -> Vec<usize> {
    let mut strides = vec![1; dims.len()];
    for d in (0..dims.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * dims[d + 1];
    }
    strides
}

/// Steps `coords` to the next position of `dims` in row-major order.
fn advance(coords: &mut [usize], dims: &[usize]) {
    for d in (0..coords.len()).rev() {
        coords[d] += 1;
        if coords[d] < dims[d] {
            return;
        }
        coords[d] = 0;
    }
}
