//! Indexing kernels on contiguous buffers: select whole slices along an axis, or gather and
//! scatter element by element. Index values are checked before any memory is touched. Also
//! the CPU's side of the [`Index`] contract.

use super::backend::{Cpu, ensure_output};
use super::buffer::{CpuBuffer, append, map_buffer};
use super::parallel::for_each_row;
use crate::backend::contract::{Index, Pointwise, Src, check_index_dtype};
use crate::dtype::DType;
use crate::element::Float;
use crate::error::{Error, Result};

impl Index for Cpu {
    fn index_select(
        &self,
        x: Src<'_, CpuBuffer>,
        axis: usize,
        indices: Src<'_, CpuBuffer>,
    ) -> Result<CpuBuffer> {
        const OP: &str = "index_select";
        let idx = checked_indices(indices, x.dims()[axis], axis, OP)?;
        let mut dims = x.dims().to_vec();
        dims[axis] = idx.len();
        ensure_output(OP, x.dims(), x.dtype())?;
        ensure_output(OP, &dims, x.dtype())?;
        let split = split_at_axis(x.dims(), axis);
        Ok(map_buffer!(self.copy(x)?, |v| index_select(
            &v, split, &idx
        )))
    }

    fn gather(
        &self,
        x: Src<'_, CpuBuffer>,
        axis: usize,
        indices: Src<'_, CpuBuffer>,
    ) -> Result<CpuBuffer> {
        const OP: &str = "gather";
        let idx = checked_indices(indices, x.dims()[axis], axis, OP)?;
        let (dims, index_dims) = (x.dims(), indices.dims());
        ensure_output(OP, dims, x.dtype())?;
        ensure_output(OP, index_dims, x.dtype())?;
        Ok(map_buffer!(self.copy(x)?, |v| gather(
            &v, dims, axis, &idx, index_dims
        )))
    }

    fn index_add(
        &self,
        base: Src<'_, CpuBuffer>,
        axis: usize,
        indices: Src<'_, CpuBuffer>,
        source: Src<'_, CpuBuffer>,
    ) -> Result<CpuBuffer> {
        const OP: &str = "index_add";
        let idx = checked_indices(indices, base.dims()[axis], axis, OP)?;
        let split = split_at_axis(base.dims(), axis);
        add_into_copy(self, base, source, OP, |dst: &mut dyn AddInto| {
            dst.index_add(split, &idx)
        })
    }

    fn scatter_add(
        &self,
        base: Src<'_, CpuBuffer>,
        axis: usize,
        indices: Src<'_, CpuBuffer>,
        source: Src<'_, CpuBuffer>,
    ) -> Result<CpuBuffer> {
        const OP: &str = "scatter_add";
        let idx = checked_indices(indices, base.dims()[axis], axis, OP)?;
        let (dims, index_dims) = (base.dims(), indices.dims());
        add_into_copy(self, base, source, OP, |dst: &mut dyn AddInto| {
            dst.scatter_add(dims, axis, &idx, index_dims)
        })
    }
}

/// The `i64` index values, each checked to lie in `0..size` (the size of `axis`).
fn checked_indices(
    indices: Src<'_, CpuBuffer>,
    size: usize,
    axis: usize,
    op: &'static str,
) -> Result<Vec<i64>> {
    check_index_dtype(indices.dtype(), op)?;
    ensure_output(op, indices.dims(), DType::I64)?;
    let CpuBuffer::I64(values) = Cpu.copy(indices)? else {
        unreachable!("checked to be i64 above")
    };
    check_indices(&values, size, axis, op)?;
    Ok(values)
}

/// A float buffer the accumulating kernels can add into, whatever its element type.
trait AddInto {
    fn index_add(&mut self, split: (usize, usize, usize), indices: &[i64]);
    fn scatter_add(&mut self, dims: &[usize], axis: usize, indices: &[i64], index_dims: &[usize]);
}

/// A copy of the base with `src` ready to be added into it; both have one float dtype.
struct Accumulation<'a, T> {
    dst: &'a mut [T],
    src: &'a [T],
}

impl<T: Float> AddInto for Accumulation<'_, T> {
    fn index_add(&mut self, split: (usize, usize, usize), indices: &[i64]) {
        index_add(self.dst, split, indices, self.src);
    }
    fn scatter_add(&mut self, dims: &[usize], axis: usize, indices: &[i64], index_dims: &[usize]) {
        scatter_add(self.dst, dims, axis, indices, index_dims, self.src);
    }
}

/// Copies `base`, lets `add` accumulate `source` into the copy, and returns it.
fn add_into_copy(
    cpu: &Cpu,
    base: Src<'_, CpuBuffer>,
    source: Src<'_, CpuBuffer>,
    op: &'static str,
    add: impl FnOnce(&mut dyn AddInto),
) -> Result<CpuBuffer> {
    match (cpu.copy(base)?, cpu.copy(source)?) {
        (CpuBuffer::F32(mut dst), CpuBuffer::F32(src)) => {
            add(&mut Accumulation {
                dst: &mut dst,
                src: &src,
            });
            Ok(CpuBuffer::F32(dst))
        }
        (CpuBuffer::F64(mut dst), CpuBuffer::F64(src)) => {
            add(&mut Accumulation {
                dst: &mut dst,
                src: &src,
            });
            Ok(CpuBuffer::F64(dst))
        }
        (dst, src) if dst.dtype() == src.dtype() => Err(Error::DType {
            op,
            expected: "a floating-point tensor",
            found: dst.dtype(),
        }),
        (dst, src) => Err(Error::DTypeMismatch {
            op,
            lhs: dst.dtype(),
            rhs: src.dtype(),
        }),
    }
}

/// Fails with the first index outside `0..size`.
fn check_indices(indices: &[i64], size: usize, axis: usize, op: &'static str) -> Result<()> {
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
fn split_at_axis(dims: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        dims[..axis].iter().product(),
        dims[axis],
        dims[axis + 1..].iter().product(),
    )
}

/// `out[o, j, i] = src[o, indices[j], i]` for a source viewed as `[outer, size, inner]`.
fn index_select<T: Copy>(
    src: &[T],
    (outer, size, inner): (usize, usize, usize),
    indices: &[i64],
) -> Vec<T> {
    let mut out = Vec::with_capacity(outer * indices.len() * inner);
    for o in 0..outer {
        for &j in indices {
            let start = (o * size + j as usize) * inner;
            append(&mut out, &src[start..start + inner]);
        }
    }
    out
}

/// `dst[o, indices[j], i] += src[o, j, i]`, the adjoint of [`index_select`].
fn index_add<T: Float>(
    dst: &mut [T],
    (outer, size, inner): (usize, usize, usize),
    indices: &[i64],
    src: &[T],
) {
    for o in 0..outer {
        for (j, &target) in indices.iter().enumerate() {
            let to = (o * size + target as usize) * inner;
            let from = (o * indices.len() + j) * inner;
            // Indexed rather than zipped (`Zip::new` is not `#[inline]`: a call per index
            // where codegen units are not inlined into each other).
            let source = &src[from..from + inner];
            for (i, d) in dst[to..to + inner].iter_mut().enumerate() {
                *d += source[i];
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
fn gather<T: Copy>(
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
fn scatter_add<T: Float>(
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
