//! Imported ONNX gathers beyond `Gather`: `GatherElements` (PyTorch's `gather`, as BERT
//! exports pick position and token-type ids) and `GatherND` (the dynamo exporter's advanced
//! indexing). Indices are checked on the host first, so an index out of range is an error
//! naming it and where it is, never a read outside the data (the scatters of
//! import_scatter_ops.rs check theirs the same way).

use super::import_ops::{Attributes, arg, axis, invalid};
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::DynTensor;

/// The values of an index tensor, `int64` (or `int32`, which ONNX files hold as `int64`).
pub(super) fn index_values(op: &str, indices: &DynTensor) -> Result<Vec<i64>> {
    if indices.dtype() != DType::I64 {
        return Err(invalid(format!(
            "{op} with {} indices: expected int64",
            indices.dtype()
        )));
    }
    indices.to_vec::<i64>()
}

/// `index` (negative counting from the end, as ONNX allows) resolved within `size`, or the
/// error naming it, its position `at` among the indices and the axis it indexes.
pub(super) fn resolve(op: &str, index: i64, size: usize, at: usize, axis: usize) -> Result<i64> {
    let size = size as i64;
    let resolved = if index < 0 { index + size } else { index };
    if (0..size).contains(&resolved) {
        Ok(resolved)
    } else {
        Err(invalid(format!(
            "{op}: index {index} (element {at} of the indices) is out of range for axis {axis} \
             of size {size}; indices lie in [-{size}, {size})"
        )))
    }
}

/// Checks what loading knows of a node of these ops: its axis attributes against the
/// ranks of inputs that are initializers or graph inputs.
pub(super) fn check(op: &str, a: &Attributes<'_>, ranks: &[Option<usize>]) -> Result<()> {
    let rank = |k: usize| ranks.get(k).copied().flatten();
    match (op, rank(0), rank(1)) {
        ("GatherElements", Some(data), _) => elements_axis(a, data).map(drop),
        ("GatherND", Some(data), Some(indices)) => nd_batch_dims(a, data, indices).map(drop),
        _ => Ok(()),
    }
}

/// `GatherElements`'s (and `ScatterElements`') `axis` within data of `rank`.
pub(super) fn elements_axis(a: &Attributes<'_>, rank: usize) -> Result<usize> {
    let value = a.checked_int("axis", 0)?;
    axis(value, rank).map_err(|_| {
        invalid(format!(
            "attribute axis = {value} is out of range for data of rank {rank}"
        ))
    })
}

/// `GatherND`'s `batch_dims`: below the ranks of both data and indices.
fn nd_batch_dims(a: &Attributes<'_>, data_rank: usize, indices_rank: usize) -> Result<usize> {
    let value = a.checked_int("batch_dims", 0)?;
    let rank = data_rank.min(indices_rank);
    usize::try_from(value)
        .ok()
        .filter(|&b| b < rank)
        .ok_or_else(|| {
            invalid(format!(
                "attribute batch_dims = {value}: expected 0 to {} for data of rank {data_rank} \
                 and indices of rank {indices_rank}",
                rank as i64 - 1
            ))
        })
}

/// `GatherElements`: `out[p] = data[p with its axis coordinate replaced by indices[p]]`; the
/// indices have the data's rank and the output their shape.
pub(super) fn gather_elements(
    a: &Attributes<'_>,
    args: &[Option<&DynTensor>],
) -> Result<DynTensor> {
    let (data, indices) = (arg(args, 0)?, arg(args, 1)?);
    let at = elements_axis(a, data.rank())?;
    let resolved = element_indices("GatherElements", data, indices, at)?;
    let index = DynTensor::from_vec(resolved, indices.dims())?.to(&data.device())?;
    data.gather(at as isize, &index)
}

/// The indices of `GatherElements` or `ScatterElements` along `axis`, resolved: they have
/// the data's rank and no larger size on any other axis (so each names an element of the
/// data), and each lies within the axis.
pub(super) fn element_indices(
    op: &str,
    data: &DynTensor,
    indices: &DynTensor,
    axis: usize,
) -> Result<Vec<i64>> {
    let fits = indices.rank() == data.rank()
        && (indices.dims().iter().zip(data.dims()))
            .enumerate()
            .all(|(d, (&i, &n))| d == axis || i <= n);
    if !fits {
        return Err(invalid(format!(
            "{op} of data {:?} by indices {:?}: the indices must have the data's rank and no \
             larger size on any axis but {axis}",
            data.dims(),
            indices.dims()
        )));
    }
    let size = data.dims()[axis];
    index_values(op, indices)?
        .into_iter()
        .enumerate()
        .map(|(k, i)| resolve(op, i, size, k, axis))
        .collect()
}

/// `GatherND`: each row of the last axis of `indices` (`k` values) picks a slice
/// `data[b..., i_0, ..., i_{k-1}, ...]`, the first `batch_dims` axes shared by data and
/// indices. Computed as one `index_select` on data with the batch and indexed axes folded
/// into one.
pub(super) fn gather_nd(a: &Attributes<'_>, args: &[Option<&DynTensor>]) -> Result<DynTensor> {
    let (data, indices) = (arg(args, 0)?, arg(args, 1)?);
    let batch = nd_batch_dims(a, data.rank(), indices.rank())?;
    let (ddims, idims) = (data.dims(), indices.dims());
    if ddims[..batch] != idims[..batch] {
        return Err(invalid(format!(
            "GatherND with batch_dims {batch}: data {ddims:?} and indices {idims:?} differ in \
             their batch axes"
        )));
    }
    let k = idims[idims.len() - 1];
    if k < 1 || batch + k > ddims.len() {
        return Err(invalid(format!(
            "GatherND of data {ddims:?} by indices {idims:?} (batch_dims {batch}): the last \
             index axis must hold 1 to {} values",
            ddims.len() - batch
        )));
    }
    let batches: usize = ddims[..batch].iter().product();
    let indexed = &ddims[batch..batch + k];
    let per_batch: usize = indexed.iter().product();
    let rest = &ddims[batch + k..];
    let values = index_values("GatherND", indices)?;
    // Each tuple, as a row-major offset into the folded axis of its batch.
    let tuples = values.len() / k;
    let per_tuple_batch = tuples / batches.max(1);
    let mut rows = Vec::with_capacity(tuples);
    for (t, tuple) in values.chunks_exact(k).enumerate() {
        let mut offset = 0i64;
        for (j, (&i, &size)) in tuple.iter().zip(indexed).enumerate() {
            offset = offset * size as i64 + resolve("GatherND", i, size, t * k + j, batch + j)?;
        }
        let b = t.checked_div(per_tuple_batch).unwrap_or(0) as i64;
        rows.push(b * per_batch as i64 + offset);
    }
    let mut folded = vec![batches * per_batch];
    folded.extend_from_slice(rest);
    let picked = data.reshape(&folded)?.index_select(
        0,
        &DynTensor::from_vec(rows, &[tuples])?.to(&data.device())?,
    )?;
    let mut dims = idims[..idims.len() - 1].to_vec();
    dims.extend_from_slice(rest);
    picked.reshape(&dims)
}
