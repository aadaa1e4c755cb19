//! Indexing kernels on contiguous buffers: select whole slices along an axis, or gather and
//! scatter element by element. Index values are checked before any memory is touched.

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
    for (offset, &value) in gathered_offsets(dims, index_dims, axis, indices).zip(src) {
        dst[offset] += value;
    }
}
