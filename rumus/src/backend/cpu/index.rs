//! Indexing kernels on contiguous buffers: select whole slices along an axis, or gather and
//! scatter element by element. Index values are checked before any memory is touched.

use super::parallel::for_each_row;
use crate::element::Float;
use crate::error::{Error, Result};

/// Fails with the first index outside `0..size`.
pub fn check_indices(indices: &[i64], size: usize, axis: usize, op: &'static str) -> Result<()> {
    match indices.iter().find(|&&i| i < 0 || i as usize >= size) {
        Some(&index) => Err(Error::IndexOutOfRange {
            op,
            index,
            axis,
            size,
        }),
        None => Ok(()),
    }
}

/// Splits contiguous dims around `axis` into (outer, axis size, inner).
pub fn split_at_axis(dims: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        dims[..axis].iter().product(),
        dims[axis],
        dims[axis + 1..].iter().product(),
    )
}

/// `out[o, j, i] = src[o, indices[j], i]` for a source viewed as `[outer, size, inner]`.
pub fn index_select<T: Copy>(
    src: &[T],
    (outer, size, inner): (usize, usize, usize),
    indices: &[i64],
) -> Vec<T> {
    let mut out = Vec::with_capacity(outer * indices.len() * inner);
    for o in 0..outer {
        for &j in indices {
            let start = (o * size + j as usize) * inner;
            out.extend_from_slice(&src[start..start + inner]);
        }
    }
    out
}

/// `dst[o, indices[j], i] += src[o, j, i]`, the adjoint of [`index_select`].
pub fn index_add<T: Float>(
    dst: &mut [T],
    (outer, size, inner): (usize, usize, usize),
    indices: &[i64],
    src: &[T],
) {
    for o in 0..outer {
        for (j, &target) in indices.iter().enumerate() {
            let to = (o * size + target as usize) * inner;
            let from = (o * indices.len() + j) * inner;
            for (d, &s) in dst[to..to + inner].iter_mut().zip(&src[from..from + inner]) {
                *d += s;
            }
        }
    }
}

/// For each position `p` of an index tensor with `index_dims`, the offset in a contiguous
/// tensor with `dims` of the element at `p` with its `axis` coordinate replaced by
/// `indices[p]`.
fn gathered_offsets<'a>(
    dims: &'a [usize],
    index_dims: &'a [usize],
    axis: usize,
    indices: &'a [i64],
) -> impl Iterator<Item = usize> + 'a {
    let strides = crate::shape::contiguous_strides(dims);
    let mut coord = vec![0usize; index_dims.len()];
    indices.iter().map(move |&target| {
        let offset: usize = coord
            .iter()
            .enumerate()
            .map(|(a, &c)| {
                if a == axis {
                    target as usize * strides[a]
                } else {
                    c * strides[a]
                }
            })
            .sum();
        for a in (0..coord.len()).rev() {
            coord[a] += 1;
            if coord[a] < index_dims[a] {
                break;
            }
            coord[a] = 0;
        }
        offset
    })
}

/// `out[p] = src[p with axis := indices[p]]` (PyTorch `gather`).
pub fn gather<T: Copy>(
    src: &[T],
    dims: &[usize],
    axis: usize,
    indices: &[i64],
    index_dims: &[usize],
) -> Vec<T> {
    if let Some(Rows { data, taken }) = Rows::along_last_axis(dims, axis, index_dims) {
        return indices
            .chunks(taken.max(1))
            .enumerate()
            .flat_map(|(r, row)| row.iter().map(move |&t| src[r * data + t as usize]))
            .collect();
    }
    gathered_offsets(dims, index_dims, axis, indices)
        .map(|offset| src[offset])
        .collect()
}

/// `dst[p with axis := indices[p]] += src[p]` (PyTorch `scatter_add_`), the adjoint of [`gather`].
pub fn scatter_add<T: Float>(
    dst: &mut [T],
    dims: &[usize],
    axis: usize,
    indices: &[i64],
    index_dims: &[usize],
    src: &[T],
) {
    if let Some(Rows { data, taken }) = Rows::along_last_axis(dims, axis, index_dims) {
        // Row r of the indices adds only into row r of `dst`: rows split across threads.
        for_each_row(dst, data, |r, row| {
            let (targets, values) = (&indices[r * taken..(r + 1) * taken], &src[r * taken..]);
            for (&t, &value) in targets.iter().zip(values) {
                row[t as usize] += value;
            }
        });
        return;
    }
    for (offset, &value) in gathered_offsets(dims, index_dims, axis, indices).zip(src) {
        dst[offset] += value;
    }
}

/// A gather or scatter along the last axis whose indices match the data in every other axis
/// (max pooling's argmax over flattened planes): row `r` of the indices addresses row `r` of
/// the data only, so each row is a plain loop (no per-element coordinate walk) and rows are
/// independent.
struct Rows {
    /// Elements of a data row.
    data: usize,
    /// Indices in a row.
    taken: usize,
}

impl Rows {
    fn along_last_axis(dims: &[usize], axis: usize, index_dims: &[usize]) -> Option<Rows> {
        let last = dims.len().checked_sub(1)?;
        (axis == last && index_dims.len() == dims.len() && dims[..last] == index_dims[..last]).then(
            || Rows {
                data: dims[last],
                taken: index_dims[last],
            },
        )
    }
}
